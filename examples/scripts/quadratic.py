#!/usr/bin/env python3
"""A trial written in Python: any program that prints metric lines can be a
swept trial (docs/metrics.md). It minimizes f(w) = (w - target)^2 with
gradient descent from w = 0 and reports the loss as it goes.

Flags come from the sweep's ${args} macro: --lr=0.1 --target=3 --steps=20.
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--target", type=float, default=3.0)
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()

w = 0.0
for step in range(1, args.steps + 1):
    grad = 2.0 * (w - args.target)
    w -= args.lr * grad
    loss = (w - args.target) ** 2
    if loss != loss or loss > 1e30:  # diverged: report it and fail
        print(json.dumps({"step": step, "final": True, "diverged": True}), flush=True)
        sys.exit(3)
    print(json.dumps({"step": step, "loss": loss, "w": w}), flush=True)
    print(f"step {step}: w={w:.5f}", file=sys.stderr)

print(json.dumps({"step": args.steps, "final": True, "final_loss": loss}), flush=True)
