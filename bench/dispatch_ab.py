#!/usr/bin/env python3
"""Paired A/B rounds of the dispatch benchmark, for a machine that is not quiet.

bench/scheduler_bench.sh runs one build at a time: on a shared machine the
load moves between two of its runs more than a change moves the result. Here
each round runs `xargs -P 4` (the peer) and every variant back to back, in a
rotated order, on 1,000 trials of /bin/true through `swept run --slots 4`;
each variant's wall time is divided by the same round's xargs time. Reported,
per variant: the median of those paired ratios (and the quartiles), the
median wall time, the CPU time of swept and its trials per trial (user+sys,
less sensitive to the load than the wall time), and the local agent's loop
CPU per trial (`--stats`).

Usage: bench/dispatch_ab.py ROUNDS WORKDIR_PARENT LABEL=SWEPT[,VAR=VALUE...] ...
e.g.   bench/dispatch_ab.py 30 /dev/shm before=old/bin/swept after=build/bin/swept \\
           after-fallback=build/bin/swept,SWEPT_AGENT_CLONE_INTO_CGROUP=0
"""
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def usage(message):
    sys.stderr.write(message + "\n" + __doc__.split("\n\n")[-1] + "\n")
    sys.exit(2)


def parse_variant(text):
    label, _, rest = text.partition("=")
    parts = rest.split(",")
    if not label or not parts[0]:
        usage(f"bad variant '{text}': write LABEL=SWEPT[,VAR=VALUE...]")
    if not os.access(parts[0], os.X_OK):
        usage(f"variant '{label}': {parts[0]} is not an executable")
    env = {}
    for item in parts[1:]:
        key, eq, value = item.partition("=")
        if not eq:
            usage(f"variant '{label}': '{item}' is not VAR=VALUE")
        env[key] = value
    return label, parts[0], env


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_xargs():
    c0, t0 = children_cpu(), time.monotonic()
    p = subprocess.Popen(["xargs", "-P", "4", "-n", "1", "/bin/true"], stdin=subprocess.PIPE)
    p.communicate("".join(f"--x={i}\n" for i in range(1, 1001)).encode())
    if p.returncode != 0:
        sys.exit("xargs failed")
    return time.monotonic() - t0, children_cpu() - c0


def main():
    if len(sys.argv) < 4:
        usage("needs ROUNDS, WORKDIR_PARENT and at least one variant")
    try:
        rounds = int(sys.argv[1])
    except ValueError:
        usage(f"ROUNDS '{sys.argv[1]}' is not a number")
    parent = sys.argv[2]
    if not os.path.isdir(parent):
        usage(f"WORKDIR_PARENT {parent} is not a directory")
    variants = [parse_variant(v) for v in sys.argv[3:]]
    tmp = tempfile.mkdtemp()
    try:
        spec = os.path.join(tmp, "noop.json")
        with open(spec, "w") as f:
            f.write('{"method": "grid", "command": ["/bin/true", "${args}"], '
                    '"parameters": {"x": {"min": 1, "max": 1000}}}')
        rows = {label: [] for label, _, _ in variants}
        peer, loads = [], []
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            xw, xc = run_xargs()
            peer.append((xw, xc))
            k = r % len(variants)
            for label, swept, extra in variants[k:] + variants[:k]:
                db = os.path.join(tmp, "db")
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(db + suffix):
                        os.remove(db + suffix)
                work = tempfile.mkdtemp(dir=parent)
                stats = os.path.join(tmp, "stats.json")
                c0, t0 = children_cpu(), time.monotonic()
                done = subprocess.run([swept, "run", spec, "--db", db, "--slots", "4", "--workdir", work + "/w",
                                       "--progress", "off", "--dashboard", "off", "--stats", stats],
                                      env=dict(os.environ, **extra), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
                wall, cpu = time.monotonic() - t0, children_cpu() - c0
                shutil.rmtree(work, ignore_errors=True)
                if done.returncode != 0:
                    sys.exit(f"{label}: swept run failed ({done.returncode}):\n{done.stderr}")
                with open(stats) as f:
                    st = json.load(f)
                if st["trials_finished"] != 1000:
                    sys.exit(f"{label}: {st['trials_finished']} trials finished, not 1000")
                rows[label].append((wall / xw, wall, cpu, st["agent_cpu_seconds"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{rounds} rounds, trial directories under {parent}; 1-minute load at the rounds' starts: "
          f"min {min(loads):.1f}, median {statistics.median(loads):.1f}, max {max(loads):.1f}")
    print(f"  {'xargs -P 4':16s} wall {statistics.median(p[0] for p in peer):.3f} s, "
          f"CPU {statistics.median(p[1] for p in peer) * 1000:.0f} us/trial")
    for label, got in rows.items():
        ratios = sorted(g[0] for g in got)
        print(f"  {label:16s} ratio to xargs {statistics.median(ratios):.2f} "
              f"(quartiles {ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}), "
              f"wall {statistics.median(g[1] for g in got):.3f} s, "
              f"CPU of swept and trials {statistics.median(g[2] for g in got) * 1000:.0f} us/trial, "
              f"agent loop {statistics.median(g[3] for g in got) * 1000:.0f} us/trial")


if __name__ == "__main__":
    main()
