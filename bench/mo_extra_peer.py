#!/usr/bin/env python3
"""Multi-objective functions swept's multi-objective searchers were NOT written against, as a check of how
they carry over (docs/benchmarks.md, "Several objectives"). Same interface as ../shared/bench/search_peer.py:

  mo_extra_peer.py list | space NAME | trial NAME --x1=... | hv NAME < points
  /usr/bin/python3 mo_extra_peer.py optuna NAME --sampler nsga2|tpe|random --trials 100 --seeds 1-8

  zdt3:     ZDT3 (Zitzler, Deb, Thiele 2000), 6 variables: a front in five disconnected pieces.
  fonseca3: Fonseca-Fleming (1995), 3 variables on [-4, 4]: a concave front.
  dtlz2x4:  DTLZ2 with 3 objectives whose distance variables are optimal at 0.8 instead of 0.5.
All objectives are minimised; each function's hypervolume is measured against REF.
"""
import json, math, sys

SPACES = {
    "zdt3": {f"x{i}": {"distribution": "uniform", "min": 0.0, "max": 1.0} for i in range(1, 7)},
    "fonseca3": {f"x{i}": {"distribution": "uniform", "min": -4.0, "max": 4.0} for i in range(1, 4)},
    "dtlz2x4": {f"x{i}": {"distribution": "uniform", "min": 0.0, "max": 1.0} for i in range(1, 7)},
}
REF = {"zdt3": [1.1, 7.0], "fonseca3": [1.1, 1.1], "dtlz2x4": [2.0, 2.0, 2.0]}


def value(name, p):
    x = [p[f"x{i}"] for i in range(1, len(SPACES[name]) + 1)]
    if name == "zdt3":
        g = 1 + 9 * sum(x[1:]) / (len(x) - 1)
        r = x[0] / g
        return [x[0], g * (1 - math.sqrt(r) - r * math.sin(10 * math.pi * x[0]))]
    if name == "fonseca3":
        k = 1 / math.sqrt(3)
        return [1 - math.exp(-sum((v - k) ** 2 for v in x)), 1 - math.exp(-sum((v + k) ** 2 for v in x))]
    if name == "dtlz2x4":
        g = sum((v - 0.8) ** 2 for v in x[2:])
        c = [math.cos(v * math.pi / 2) for v in x[:2]]
        s = [math.sin(v * math.pi / 2) for v in x[:2]]
        return [(1 + g) * c[0] * c[1], (1 + g) * c[0] * s[1], (1 + g) * s[0]]
    raise SystemExit(f"unknown function {name!r}; known: {', '.join(SPACES)}")


def hypervolume(name, points):
    import numpy as np
    from optuna._hypervolume import WFG
    ref = REF[name]
    pts = np.array([q for q in points if all(a < b for a, b in zip(q, ref))], dtype=float)
    return 0.0 if len(pts) == 0 else float(WFG().compute(pts, np.array(ref, dtype=float)))


def optuna_run(name, sampler, trials, seeds):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    hv = []
    for s in seeds:
        smp = {"nsga2": optuna.samplers.NSGAIISampler, "tpe": optuna.samplers.TPESampler,
               "random": optuna.samplers.RandomSampler}[sampler](seed=s)
        st = optuna.create_study(directions=["minimize"] * len(REF[name]), sampler=smp)
        st.optimize(lambda t: value(name, {k: t.suggest_float(k, d["min"], d["max"]) for k, d in SPACES[name].items()}),
                    n_trials=trials)
        hv.append(hypervolume(name, [t.values for t in st.trials if t.values]))
    print(json.dumps({"function": name, "sampler": sampler, "trials": trials, "ref": REF[name], "hypervolume": hv}))


def main():
    a = sys.argv[1:]
    if not a or a[0] in ("-h", "--help"):
        print(__doc__); return
    if a[0] == "list":
        print("\n".join(SPACES)); return
    if a[0] == "space":
        print(json.dumps(SPACES[a[1]], indent=1)); return
    if a[0] == "trial":
        p = {}
        for arg in a[2:]:
            k, _, v = arg.lstrip("-").partition("=")
            if k in SPACES[a[1]]: p[k] = float(v)
        m = {f"f{i + 1}": x for i, x in enumerate(value(a[1], p))}
        print(json.dumps(dict(step=1, **m))); print(json.dumps(dict(final=True, **m))); return
    if a[0] == "hv":
        pts = [json.loads(l) for l in sys.stdin if l.strip()]
        print(json.dumps({"function": a[1], "ref": REF[a[1]], "hypervolume": hypervolume(a[1], pts)})); return
    if a[0] == "optuna":
        opts = dict(zip(a[2::2], a[3::2]))
        lo, _, hi = opts.get("--seeds", "1-8").partition("-")
        optuna_run(a[1], opts.get("--sampler", "tpe"), int(opts.get("--trials", 100)), range(int(lo), int(hi or lo) + 1))
        return
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
