#!/usr/bin/env python3
"""Functions the tpe/bayes defaults were NOT chosen on, as a check of how they carry over
(docs/benchmarks.md, "Search quality"). Same interface as ../shared/bench/search_peer.py:

  search_extra_peer.py list | space NAME | trial NAME --x1=... | optuna NAME --sampler tpe|random --trials 40 --seeds 1-8

  bench/search_extra_peer.py is the PEER_SCRIPT of `search_bench quality ... --extra`.
"""
import json, math, sys

SPACES = {
    # Styblinski-Tang 4-D on [-5,5]^4: minimum -39.16617 * 4 at x_i = -2.903534.
    "styblinski4": {f"x{i}": {"distribution": "uniform", "min": -5.0, "max": 5.0} for i in range(1, 5)},
    # Levy 5-D on [-10,10]^5: minimum 0 at x_i = 1.
    "levy5": {f"x{i}": {"distribution": "uniform", "min": -10.0, "max": 10.0} for i in range(1, 6)},
    # Hartmann 3-D on [0,1]^3: minimum -3.86278.
    "hartmann3": {f"x{i}": {"distribution": "uniform", "min": 0.0, "max": 1.0} for i in range(1, 4)},
}

_H3A = [[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]]
_H3P = [[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]]


def value(name, p):
    x = [p[f"x{i}"] for i in range(1, len(SPACES[name]) + 1)]
    if name == "styblinski4":
        return 0.5 * sum(v ** 4 - 16 * v * v + 5 * v for v in x)
    if name == "levy5":
        w = [1 + (v - 1) / 4 for v in x]
        s = math.sin(math.pi * w[0]) ** 2
        s += sum((wi - 1) ** 2 * (1 + 10 * math.sin(math.pi * wi + 1) ** 2) for wi in w[:-1])
        return s + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)
    if name == "hartmann3":
        return -sum(a * math.exp(-sum(_H3A[i][j] * (x[j] - 1e-4 * _H3P[i][j]) ** 2 for j in range(3)))
                    for i, a in enumerate([1.0, 1.2, 3.0, 3.2]))
    raise SystemExit(f"unknown function {name!r}; known: {', '.join(SPACES)}")


def main():
    a = sys.argv[1:]
    if not a or a[0] in ("-h", "--help"): print(__doc__); return
    if a[0] == "list": print("\n".join(SPACES)); return
    if a[0] == "space": print(json.dumps(SPACES[a[1]])); return
    if a[0] == "trial":
        p = {k.lstrip("-"): float(v) for k, _, v in (s.partition("=") for s in a[2:])}
        v = value(a[1], p)
        print(json.dumps({"step": 1, "value": v})); print(json.dumps({"final": True, "value": v})); return
    if a[0] == "optuna":
        import optuna
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        name, opts = a[1], dict(zip(a[2::2], a[3::2]))
        lo, _, hi = opts.get("--seeds", "1-8").partition("-")
        best = []
        for s in range(int(lo), int(hi or lo) + 1):
            smp = optuna.samplers.TPESampler(seed=s) if opts.get("--sampler", "tpe") == "tpe" else optuna.samplers.RandomSampler(seed=s)
            st = optuna.create_study(direction="minimize", sampler=smp)
            st.optimize(lambda t: value(name, {k: t.suggest_float(k, d["min"], d["max"]) for k, d in SPACES[name].items()}),
                        n_trials=int(opts.get("--trials", 40)))
            best.append(st.best_value)
        print(json.dumps({"function": name, "sampler": opts.get("--sampler", "tpe"), "trials": int(opts.get("--trials", 40)), "best": best}))
        return
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
