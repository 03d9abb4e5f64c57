#!/usr/bin/env python3
"""Peer for bench/multinode.sh: PyTorch DistributedDataParallel (gloo backend) over processes
started with torchrun's environment (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT), training the
same models as the single-process peer torch_mnist.py, whose classes it imports (--peer names the
file; default ../shared/bench/torch_mnist.py beside the repository), so neither model is copied:
  mlp: 784-100-10 sigmoid, plain SGD lr 0.5, global batch 100
  cnn: conv5x5x32-pool2-conv5x5x64-pool2-fc1024-fc10 (ReLU), Adam lr 1e-3, global batch 128
The global batch is split evenly over the processes (rank r takes rows r*b .. r*b+b-1 of each
global batch, as swept-train does), DDP averages the gradients (one bucket holds either model's),
and the optimizer steps on every rank. The training set is in memory, so no data loader is timed.

Rank 0 prints one JSON line: samples_per_sec = global samples / s over --steps timed steps after
--warmup steps, the clock started and stopped after a barrier so it covers every rank's work.
"""
import argparse
import importlib.util
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def load_peer(path):
    spec = importlib.util.spec_from_file_location("torch_mnist", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # its main() runs only as a script
    return mod


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--peer", default=os.path.join(here, "..", "..", "shared", "bench", "torch_mnist.py"))
    p.add_argument("--threads", type=int, default=0, help="CPU threads per process (0: torch default)")
    p.add_argument("--batch-size", type=int, default=0, help="global batch (0: 100 mlp, 128 cnn)")
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: 2000 mlp, 50 cnn)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    peer = load_peer(a.peer)
    if a.threads:
        torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    gbs = a.batch_size or (100 if a.model == "mlp" else 128)
    if gbs % world:
        raise SystemExit(f"torch_ddp_mnist: the global batch {gbs} must divide by WORLD_SIZE={world}")
    bs = gbs // world
    steps = a.steps or (2000 if a.model == "mlp" else 50)
    X = torch.tensor(peer.read_idx(f"{a.data}/train-images-idx3-ubyte"), dtype=torch.float32).view(-1, 784) / 255.0
    Y = torch.tensor(peer.read_idx(f"{a.data}/train-labels-idx1-ubyte").astype("int64"))
    torch.manual_seed(a.seed)  # every rank starts from the same weights (DDP also broadcasts rank 0's)
    model = DDP(peer.MLP(100) if a.model == "mlp" else peer.CNN())
    opt = (torch.optim.SGD(model.parameters(), lr=0.5) if a.model == "mlp"
           else torch.optim.Adam(model.parameters(), lr=1e-3))
    n = X.shape[0]

    def step(i):
        j = (i * gbs) % (n - gbs) + rank * bs
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(X[j:j + bs]), Y[j:j + bs])
        loss.backward()  # DDP's all-reduce of the gradient bucket runs here
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(a.warmup + i)
    dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        print(json.dumps({"peer": "pytorch-ddp-gloo", "torch": torch.__version__, "model": a.model,
                          "world_size": world, "threads": torch.get_num_threads(), "global_batch": gbs,
                          "steps": steps, "samples_per_sec": round(steps * gbs / dt, 1),
                          "step_ms": round(dt / steps * 1000, 4), "loss": round(float(loss), 4)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
