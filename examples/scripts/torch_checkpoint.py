#!/usr/bin/env python3
"""The checkpoint contract (docs/checkpoints.md) in PyTorch: a linear regression that saves to
$SWEPT_CHECKPOINT_DIR atomically on SIGTERM and at the end, and resumes with the command line's lr."""
import argparse, json, os, signal, sys, torch

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--steps", type=int, default=300)
a = p.parse_args()
folder = os.environ.get("SWEPT_CHECKPOINT_DIR", ".")
path, stop = os.path.join(folder, "model.pt"), []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # finish the step, then save
torch.manual_seed(0)
model, w = torch.nn.Linear(8, 1), torch.randn(8, 1)
opt, step = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum), 0
if os.path.exists(path):
    try:
        s = torch.load(path)  # a truncated copy fails here: refuse it, never start over silently
    except Exception as e:
        print(f"checkpoint {path} cannot be read ({e}): copy it again, or delete it to start over", file=sys.stderr)
        sys.exit(2)
    model.load_state_dict(s["model"]); opt.load_state_dict(s["opt"]); step = s["step"]; torch.set_rng_state(s["rng"])
    old = {k: opt.param_groups[0][k] for k in ("lr", "momentum")}
    for g in opt.param_groups: g.update(lr=a.lr, momentum=a.momentum)  # the new ${args} win over the checkpoint's
    changed = ", ".join(f"{k} {v} -> {getattr(a, k)}" for k, v in old.items() if v != getattr(a, k))
    print(f"resumed at step {step}; changed: {changed or 'nothing'}", file=sys.stderr)
while step < a.steps and not stop:
    x = torch.randn(64, 8)  # the batch comes from the random state the checkpoint keeps
    loss = torch.nn.functional.mse_loss(model(x), x @ w)
    opt.zero_grad(); loss.backward(); opt.step(); step += 1
    print(json.dumps({"step": step, "loss": loss.item()}), flush=True)
with open(os.path.join(folder, ".model.pt.tmp"), "wb") as f:  # temporary, fsync, rename: never half a file
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "rng": torch.get_rng_state()}, f)
    f.flush(); os.fsync(f.fileno())
os.replace(f.name, path); d = os.open(folder, os.O_RDONLY); os.fsync(d); os.close(d)
sys.exit(130 if stop else 0)
