#!/usr/bin/env python3
"""Peer of allreduce_bench for bench/multinode.sh: torch.distributed.all_reduce on the gloo
backend (the same Gloo library, Debian's libgloo, behind the same TCP link), timed the way
allreduce_bench times swept-train's all-reduce: per size (1 MB up to --max-mb, powers of two) a
checked all-reduce, a warm-up one, then iters = clamp(512 MB / size, 5, 100) all-reduces timed as
one loop after a barrier. Started with torchrun's environment; rank 0 prints one JSON line per
size with algbw and busbw (= algbw * 2(n-1)/n, nccl-tests' definition) in Gbit/s.
"""
import argparse
import json
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-mb", type=int, default=64)
    a = p.parse_args()
    torch.set_num_threads(1)  # the sums are Gloo's own loops; no torch op runs in the timed loop
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    mb = 1
    while mb <= a.max_mb:
        count = (mb << 20) // 4
        pattern = torch.arange(count, dtype=torch.int64).remainder(7).add(1).float()
        t = pattern * (rank + 1)
        dist.all_reduce(t)
        if not torch.equal(t, pattern * (n * (n + 1) // 2)):
            raise SystemExit(f"torch_allreduce: wrong sum at {mb} MB")
        dist.all_reduce(t)  # warm-up
        iters = min(100, max(5, 512 // mb))
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        seconds = (time.perf_counter() - t0) / iters
        if rank == 0:
            algbw = (mb << 20) * 8 / seconds / 1e9
            print(json.dumps({"bench": "allreduce", "peer": "torch-gloo", "ranks": n, "bytes": mb << 20,
                              "iters": iters, "us_per_op": round(seconds * 1e6, 1), "algbw_gbit_s": round(algbw, 3),
                              "busbw_gbit_s": round(algbw * 2 * (n - 1) / n, 3)}), flush=True)
        mb *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
