#!/usr/bin/python3
"""A PyTorch DDP script as a user would write it for torchrun, run by the
multi-node tests (multinode_netns_test.sh) as a swept trial: it knows nothing
of swept, only torchrun's environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
RANK, LOCAL_RANK) through init_process_group(init_method="env://").

A tiny linear model wrapped in DistributedDataParallel (Gloo, CPU) trains for
--steps steps on a shard of a synthetic regression problem per rank; RANK 0
prints one metric line per step, {"step": S, "loss": L}. At the end every
rank checks that DDP kept the replicas equal (an all-gather of a parameter
checksum) and exits 1 when not. Each rank says on stderr who it is, its pid
and the environment it was given, so that the test can check where it ran.

Options (swept passes them as --name=value):
  --steps N          steps to train (default 20)
  --step_ms MS       sleep per step, so a test can act while the trial runs
  --fail_rank R      this rank exits 1 at --fail_step (default: none)
  --fail_step S      (default 3; 0: before joining the group, so that the
                     other ranks wait in the rendezvous, unaware, until
                     stopped or --timeout_s)
  --timeout_s S      Gloo's timeout for the rendezvous and each collective
                     (default 60), so that a lost peer ends the run
"""
import argparse
import datetime
import json
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
except ImportError as e:  # the test checks for torch first; this is for a hand run
    sys.exit(f"ddp_trial: PyTorch is missing ({e}): install Debian's python3-torch")


def parse():
    p = argparse.ArgumentParser(description="a small PyTorch DDP trial")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step_ms", type=int, default=0)
    p.add_argument("--fail_rank", type=int, default=-1)
    p.add_argument("--fail_step", type=int, default=3)
    p.add_argument("--timeout_s", type=int, default=60)
    return p.parse_args()


def leave(code):
    """Exits at once, without torch's teardown. In Debian's torch 1.13,
    freeing the DDP Reducer at exit can deadlock (~ProcessGroupGloo joins a
    callback thread that waits for the GIL the exiting thread holds; seen
    here about one run in ten), and the rank would then run until stopped."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main():
    args = parse()
    env = {k: os.environ.get(k, "") for k in (
        "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "GROUP_RANK", "SWEPT_NODES", "SWEPT_NODE_RANK", "GLOO_SOCKET_IFNAME")}
    print(f"ddp_trial: pid {os.getpid()} env {json.dumps(env, sort_keys=True)}", file=sys.stderr, flush=True)
    if args.fail_step == 0 and env["RANK"] == str(args.fail_rank):
        print(f"ddp_trial: rank {args.fail_rank} fails before joining the group, as asked", file=sys.stderr, flush=True)
        sys.exit(1)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"ddp_trial: rank {rank} of {world} joined the group", file=sys.stderr, flush=True)

    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    true_w = torch.arange(1.0, 9.0).unsqueeze(1)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    for step in range(1, args.steps + 1):
        if rank == args.fail_rank and step == args.fail_step:
            print(f"ddp_trial: rank {rank} fails at step {step} as asked", file=sys.stderr, flush=True)
            leave(1)
        x = torch.randn(32, 8, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), x @ true_w)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        # The loss averaged over ranks, so that RANK 0's line is the job's.
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(json.dumps({"step": step, "loss": mean.item() / world}), flush=True)
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000)

    checksum = torch.cat([p.detach().flatten() for p in model.parameters()]).double().sum().reshape(1)
    every = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(every, checksum)
    if any(c.item() != checksum.item() for c in every):
        print(f"ddp_trial: replicas differ after training: {[c.item() for c in every]}", file=sys.stderr)
        leave(1)
    print(f"ddp_trial: rank {rank} done, replicas equal", file=sys.stderr, flush=True)
    # The barrier lets every rank finish the last collective before any
    # closes its connections; then no teardown (leave()).
    dist.barrier()
    leave(0)


if __name__ == "__main__":
    main()
