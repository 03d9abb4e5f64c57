#!/usr/bin/env python3
"""The toy problem of Jaderberg et al. 2017 ("Population Based Training of
Neural Networks", figure 2) as a swept trial that keeps the checkpoint
contract (docs/checkpoints.md).

theta in R^2 starts at (0.9, 0.9). The true objective is
    Q(theta) = 1.2 - (theta1^2 + theta2^2)        (its maximum: 1.2 at 0)
but training only sees the surrogate
    Q_hat(theta | h) = 1.2 - (h1 theta1^2 + h2 theta2^2)
and climbs it by gradient ascent with step size eta:
    theta_i <- theta_i + eta * dQ_hat/dtheta_i = theta_i - 2 eta h_i theta_i.
So with h = (1, 0) only theta1 shrinks, with (0, 1) only theta2: no fixed h
with a zero in it reaches 1.2, and small h get there slowly. The
hyperparameters h1, h2 are what a sweep searches (and PBT changes between
segments); Q is the metric to maximise.

Flags (the sweep's ${args}): --h1, --h2 (>= 0), --eta (> 0), --max_steps,
--step_seconds (a pause per step, so that a scheduler that stops members at a
metric step, as PBT does, meets them near it: the real work here takes
microseconds).

Checkpoint: $SWEPT_CHECKPOINT_DIR/toy.json (the current folder without it),
{"state": {"step", "theta", "h"}, "sha256": of the state's canonical JSON},
written atomically (temporary file starting with '.', fsync, rename, fsync of
the folder) on SIGTERM and at the end, verified when read. A file that fails
the check exits 2 (docs/exit-codes.md). SIGTERM: finish the step, save, exit
130. At $SWEPT_PBT_STOP_STEP (a PBT segment's end, set by the scheduler) it
saves and waits for that SIGTERM, so the checkpoint is the interval's step.
Metric lines: {"step", "Q", "Q_hat", "theta1", "theta2"} after each step;
the last {"step", "final": true, "Q"}. On resume the steps go on from the
checkpoint's, with the command line's h (a stderr line names a change).
"""
import argparse
import hashlib
import json
import os
import signal
import sys
import time

FILE = "toy.json"


def canonical(state):
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


def save(folder, state):
    tmp = os.path.join(folder, "." + FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"state": state, "sha256": hashlib.sha256(canonical(state).encode()).hexdigest()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, FILE))
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)


def load(folder):
    """The saved state, None when there is none; exits 2 on a damaged file."""
    path = os.path.join(folder, FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
        state = doc["state"]
        ok = hashlib.sha256(canonical(state).encode()).hexdigest() == doc["sha256"]
        ok = ok and isinstance(state["step"], int) and len(state["theta"]) == 2
    except (ValueError, KeyError, TypeError) as e:
        ok, state = False, str(e)
    if not ok:
        print(f"pbt_toy: checkpoint {path} fails its check (truncated or damaged): copy it again, "
              "or delete it to start from step 0", file=sys.stderr)
        sys.exit(2)
    return state


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--h1", type=float, required=True)
    p.add_argument("--h2", type=float, required=True)
    p.add_argument("--eta", type=float, default=0.05)
    p.add_argument("--max_steps", type=int, default=100)
    p.add_argument("--step_seconds", type=float, default=0.0)
    a = p.parse_args()
    if a.h1 < 0 or a.h2 < 0 or a.eta <= 0 or a.max_steps < 1 or a.step_seconds < 0:
        p.error("--h1 and --h2 must be >= 0, --eta > 0, --max_steps >= 1, --step_seconds >= 0")
    folder = os.environ.get("SWEPT_CHECKPOINT_DIR") or "."
    stop_step = int(os.environ.get("SWEPT_PBT_STOP_STEP") or 0)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    state = load(folder) or {"step": 0, "theta": [0.9, 0.9], "h": [a.h1, a.h2]}
    h = [a.h1, a.h2]
    if state["step"] > 0:
        print(f"pbt_toy: resumed at step {state['step']}, theta {state['theta']}; h {state['h']} -> {h}"
              if state["h"] != h else f"pbt_toy: resumed at step {state['step']}, h unchanged", file=sys.stderr)
    state["h"] = h
    theta = state["theta"]
    while state["step"] < a.max_steps and not stop:
        theta = [t - 2 * a.eta * hi * t for t, hi in zip(theta, h)]
        state["step"] += 1
        state["theta"] = theta
        q = 1.2 - (theta[0] ** 2 + theta[1] ** 2)
        q_hat = 1.2 - (h[0] * theta[0] ** 2 + h[1] * theta[1] ** 2)
        print(json.dumps({"step": state["step"], "Q": q, "Q_hat": q_hat, "theta1": theta[0], "theta2": theta[1]}),
              flush=True)
        if state["step"] == stop_step and stop_step < a.max_steps:
            save(folder, state)  # the segment ends here: wait for the scheduler's SIGTERM
            while not stop:  # polled: signal.pause() would miss a SIGTERM that came just before it
                time.sleep(0.05)
        elif a.step_seconds > 0:
            time.sleep(a.step_seconds)
    save(folder, state)
    if stop:
        sys.exit(130)
    print(json.dumps({"step": state["step"], "final": True, "Q": 1.2 - (theta[0] ** 2 + theta[1] ** 2)}),
          flush=True)


if __name__ == "__main__":
    main()
