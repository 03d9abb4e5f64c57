#!/usr/bin/env python3
"""bench/line_times.py LEDGER CMD [ARGS...]: runs CMD as a swept trial would
run it, passing its standard output through line by line, and appends to
LEDGER, for each line, "TRIAL TIME LINE": the trial's id ($SWEPT_TRIAL_ID),
the Unix time at which the line came (the trainer flushes every line, so
this is when it wrote it) and the line as it was. bench/pbt_mnist.sh's
`asha4` search reads it to know which steps every trial had run at the
moment the first one reached the target, which the store cannot say (metric
rows carry steps, not times).

Signals: the agent stops a trial by signalling its process group, which
holds CMD too, so this wrapper only waits for CMD through a SIGTERM or
SIGINT (a Python handler, which exec resets, so CMD keeps its own), then
ends as CMD did: its exit code, or killed by the same signal."""
import os
import signal
import subprocess
import sys
import time

if len(sys.argv) < 3:
    sys.exit("usage: line_times.py LEDGER CMD [ARGS...]")
ledger_path, cmd = sys.argv[1], sys.argv[2:]
trial = os.environ.get("SWEPT_TRIAL_ID", "?")
# CMD gets the signal from the group itself; this process only outlives it.
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: None)
child = subprocess.Popen(cmd, stdout=subprocess.PIPE)
# Appends of one short line each: lines of trials running at once stay whole.
with open(ledger_path, "ab", buffering=0) as ledger:
    for line in iter(child.stdout.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        ledger.write(f"{trial} {time.time():.6f} ".encode() + line.rstrip(b"\n") + b"\n")
rc = child.wait()
if rc < 0:  # killed by a signal: die of the same one, so the agent sees what CMD did
    signal.signal(-rc, signal.SIG_DFL)
    os.kill(os.getpid(), -rc)
sys.exit(rc)
