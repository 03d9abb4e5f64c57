#!/usr/bin/env python3
"""A trial with two objectives and a constraint (examples/multi-objective.yaml):
a made-up model whose width buys accuracy with latency and memory, so that no
one trial is best and the sweep's answer is a Pareto front (docs/metrics.md
for the metric lines). Deterministic in its flags, and quick: it prints a few
steps of a learning curve, then the final values.

Flags come from the sweep's ${args} macro: --lr=0.01 --width=128.
"""
import argparse
import json
import math

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--width", type=int, required=True)
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()

# The loss falls with width and is lowest at lr = 10^-1.5; latency and memory
# grow with width. Wider is better for loss and worse for latency: a trade-off.
floor = 0.3 * (math.log10(args.lr) + 1.5) ** 2 + 40.0 / args.width
latency_ms = 2.0 + 0.05 * args.width
memory_mb = 64.0 + 0.75 * args.width
for step in range(1, args.steps + 1):
    loss = floor + 1.0 / step
    print(json.dumps({"step": step, "loss": loss}), flush=True)
print(json.dumps({"step": args.steps, "loss": floor + 1.0 / args.steps, "latency_ms": latency_ms,
                  "memory_mb": memory_mb}), flush=True)
