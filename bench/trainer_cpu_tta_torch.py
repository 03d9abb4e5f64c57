#!/usr/bin/env python3
"""Time-to-accuracy peer for bench/trainer_cpu_tta.sh: swept-train's CNN recipe in PyTorch.

The recipe of swept-train's CNN (trainer/README.md): conv5x5x32-pool2-conv5x5x64-pool2-fc1024-fc10
(ReLU, 'same' padding), Adam (beta 0.9/0.999, eps 1e-8), a cosine learning rate from --lr to 0
over the run (set before each step, as swept-train does), batch --batch-size, --epochs passes
over the first 55000 training images (swept-train keeps the last 5000 for validation) in a
fresh random order each epoch, partial last batches dropped. Then the test accuracy.

Prints one JSON line: test_accuracy, train_seconds, and seconds_since_start (from the
interpreter's start, read from /proc, to the accuracy being known). Run by
/usr/bin/python3 (Debian's python3-torch).
"""
import argparse, json, math, os, struct, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def process_start_time():
    """Seconds since the epoch at which this process started (field 22 of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])
    with open("/proc/stat") as f:
        btime = next(int(l.split()[1]) for l in f if l.startswith("btime"))
    return btime + start_ticks / os.sysconf("SC_CLK_TCK")


def read_idx(path):
    raw = open(path, "rb").read()
    ndim = struct.unpack(">I", raw[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 32, 5, padding=2), nn.Conv2d(32, 64, 5, padding=2)
        self.f1, self.f2 = nn.Linear(7 * 7 * 64, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x.view(-1, 1, 28, 28))), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--threads", type=int, default=0, help="0: torch default")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_count = 55000
    X = torch.tensor(read_idx(f"{a.data}/train-images-idx3-ubyte")[:train_count], dtype=torch.float32).view(-1, 784) / 255.0
    Y = torch.tensor(read_idx(f"{a.data}/train-labels-idx1-ubyte")[:train_count].astype(np.int64))
    Xt = torch.tensor(read_idx(f"{a.data}/t10k-images-idx3-ubyte"), dtype=torch.float32).view(-1, 784) / 255.0
    Yt = torch.tensor(read_idx(f"{a.data}/t10k-labels-idx1-ubyte").astype(np.int64))
    model = CNN()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    steps_per_epoch = train_count // a.batch_size
    total = steps_per_epoch * a.epochs
    t0 = time.perf_counter()
    step = 0
    for _ in range(a.epochs):
        perm = torch.randperm(train_count)
        for j in range(steps_per_epoch):
            for g in opt.param_groups:
                g["lr"] = a.lr * 0.5 * (1 + math.cos(math.pi * step / total))
            idx = perm[j * a.batch_size:(j + 1) * a.batch_size]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(X[idx]), Y[idx]).backward()
            opt.step()
            step += 1
    train_s = time.perf_counter() - t0
    with torch.no_grad():
        acc = sum((model(Xt[i:i + 1000]).argmax(1) == Yt[i:i + 1000]).sum().item() for i in range(0, len(Xt), 1000)) / len(Xt)
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "epochs": a.epochs, "lr": a.lr, "batch_size": a.batch_size, "test_accuracy": round(acc, 4),
                      "train_seconds": round(train_s, 3),
                      "seconds_since_start": round(time.time() - process_start_time(), 3)}))


if __name__ == "__main__":
    main()
