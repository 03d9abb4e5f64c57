#!/usr/bin/env python3
"""Shapes where single-objective search used to lose to Optuna's TPE (issue 28): ill-conditioned functions whose
dimensions are correlated (rotated ellipsoids, rotated Rosenbrock valleys) and functions with many local minima
(Rastrigin, Griewank, Schwefel, Levy, Styblinski-Tang), in several dimensions. Same interface as
../shared/bench/search_peer.py, plus a `serve` mode so that a searcher can evaluate many trials in one process:

  search_shapes_peer.py list [tune|holdout|unseen]   the names (all, or one set)
  search_shapes_peer.py space NAME                   the W&B `parameters` block
  search_shapes_peer.py trial NAME --x1=... ...      {"step": 1, "value": v} and a final line; minimize it
  search_shapes_peer.py serve NAME                   one JSON object of params a line in, one value a line out
  /usr/bin/python3 search_shapes_peer.py optuna NAME --sampler tpe|random --trials 40 --seeds 1-8
      {"function", "sampler", "trials", "best": [best value per seed]} (Optuna's defaults, one trial at a time)

Two sets. `tune` is what changes to swept's searchers may be judged on while they are developed; `holdout` is run
only to check a change that is already chosen (other dimensions, other rotations, other shifts of the same
families, and two families that are in no tuning function), never to choose one. Every function's minimum is
given beside it, and `python3 search_shapes_peer.py check` verifies each at its known minimiser. A third set,
`unseen` (a rotated cigar, Dixon-Price, a rotated Rastrigin, Alpine, Salomon, a 3-D rotated ellipsoid), was
written on 2026-11-27 before that session's changes and run once, at its end, to judge them.

The rotations are fixed orthogonal matrices drawn from a seeded generator by Gram-Schmidt (pure Python, so a trial
needs no numpy); the shifts move the optimum off the centre of the box, where a search that favours the middle
would otherwise look better than it is.
"""
import json, math, random, sys

# name: (family, dimension, rotation/shift seed, set)
FUNCS = {
    "ellipsoid_rot4": ("ellipsoid", 4, 11, "tune"),
    "rosen_rot3": ("rosen", 3, 12, "tune"),
    "rastrigin3": ("rastrigin", 3, 0, "tune"),
    "griewank4": ("griewank", 4, 0, "tune"),
    "schwefel2": ("schwefel", 2, 0, "tune"),
    "levy4": ("levy", 4, 0, "tune"),
    "styblinski3": ("styblinski", 3, 0, "tune"),
    "ellipsoid_rot6": ("ellipsoid", 6, 21, "holdout"),
    "rosen_rot5": ("rosen", 5, 22, "holdout"),
    "rastrigin_shift5": ("rastrigin_shift", 5, 23, "holdout"),
    "schwefel4": ("schwefel", 4, 0, "holdout"),
    "levy6": ("levy", 6, 0, "holdout"),
    "styblinski6": ("styblinski", 6, 0, "holdout"),
    "griewank_rot2": ("griewank_rot", 2, 24, "holdout"),
    "ackley_rot3": ("ackley_rot", 3, 25, "holdout"),
    "zakharov5": ("zakharov", 5, 0, "holdout"),
    # Written 2026-11-27 22:40 UTC, before any of that session's changes were tried, and run only once at its end:
    # the old holdout had been looked at, so it could no longer show what a change does on shapes it was not tuned on.
    "cigar_rot5": ("cigar", 5, 31, "unseen"),
    "dixon_price4": ("dixon_price", 4, 0, "unseen"),
    "rastrigin_rot4": ("rastrigin_rot", 4, 32, "unseen"),
    "alpine_shift5": ("alpine_shift", 5, 33, "unseen"),
    "salomon_shift3": ("salomon_shift", 3, 34, "unseen"),
    "ellipsoid_rot3": ("ellipsoid", 3, 35, "unseen"),
}

# The box of each family, and its minimum value.
BOX = {"ellipsoid": 5.0, "rosen": 5.0, "rastrigin": 5.12, "rastrigin_shift": 5.12, "griewank": 600.0,
       "griewank_rot": 50.0, "schwefel": 500.0, "levy": 10.0, "styblinski": 5.0, "ackley_rot": 32.768, "zakharov": 5.0,
       "cigar": 5.0, "dixon_price": 10.0, "rastrigin_rot": 5.12, "alpine_shift": 10.0, "salomon_shift": 20.0}


def rotation(d, seed):
    """A d x d orthogonal matrix: Gram-Schmidt on seeded Gaussian rows."""
    rng, rows = random.Random(seed), []
    while len(rows) < d:
        v = [rng.gauss(0.0, 1.0) for _ in range(d)]
        for r in rows:
            dot = sum(a * b for a, b in zip(v, r))
            v = [a - dot * b for a, b in zip(v, r)]
        n = math.sqrt(sum(a * a for a in v))
        if n > 1e-6: rows.append([a / n for a in v])
    return rows


def shift(d, seed, box):
    """An optimum away from the centre: each coordinate in +-[0.2, 0.6] of the half-width."""
    rng = random.Random(seed * 7919 + 1)
    return [box * rng.uniform(0.2, 0.6) * rng.choice((-1, 1)) for _ in range(d)]


def value(name, x):
    fam, d, seed, _ = FUNCS[name]
    if fam in ("ellipsoid", "rosen", "rastrigin_shift", "griewank_rot", "ackley_rot", "cigar", "rastrigin_rot",
               "alpine_shift", "salomon_shift"):
        o = shift(d, seed, BOX[fam])
        if fam in ("rastrigin_shift", "alpine_shift", "salomon_shift"):
            x = [a - b for a, b in zip(x, o)]
        else:
            r = rotation(d, seed)
            z = [a - b for a, b in zip(x, o)] if fam in ("ellipsoid", "rosen", "cigar", "rastrigin_rot") else x
            x = [sum(rij * zj for rij, zj in zip(ri, z)) for ri in r]
    if fam == "ellipsoid":  # condition number 1e3, minimum 0 at the shifted point
        return sum(1e3 ** (i / (d - 1)) * v * v for i, v in enumerate(x))
    if fam == "rosen":  # a curved valley along a rotated axis, minimum 0 at the shifted point
        z = [1.0 + 0.5 * v for v in x]
        return sum(100 * (z[i + 1] - z[i] ** 2) ** 2 + (1 - z[i]) ** 2 for i in range(d - 1))
    if fam == "cigar":  # one long axis, the rest 1e4 times steeper (condition 1e4), minimum 0 at the shifted point
        return x[0] * x[0] + 1e4 * sum(v * v for v in x[1:])
    if fam == "dixon_price":  # a curved valley coupling neighbours, minimum 0 at x_i = 2^-((2^i - 2) / 2^i)
        return (x[0] - 1) ** 2 + sum((i + 1) * (2 * x[i] ** 2 - x[i - 1]) ** 2 for i in range(1, d))
    if fam == "alpine_shift":  # many minima, separable, minimum 0 at the shifted point
        return sum(abs(v * math.sin(v) + 0.1 * v) for v in x)
    if fam == "salomon_shift":  # ripples in rings about the shifted point, minimum 0 there
        r = math.sqrt(sum(v * v for v in x))
        return 1 - math.cos(2 * math.pi * r) + 0.1 * r
    if fam in ("rastrigin", "rastrigin_shift", "rastrigin_rot"):  # minimum 0
        return 10 * d + sum(v * v - 10 * math.cos(2 * math.pi * v) for v in x)
    if fam in ("griewank", "griewank_rot"):  # minimum 0 at the origin (rotated: the same point)
        return 1 + sum(v * v for v in x) / 4000 - math.prod(math.cos(v / math.sqrt(i + 1)) for i, v in enumerate(x))
    if fam == "schwefel":  # minimum 0 at x_i = 420.9687, near the edge
        return 418.9828872724338 * d - sum(v * math.sin(math.sqrt(abs(v))) for v in x)
    if fam == "levy":  # minimum 0 at x_i = 1
        w = [1 + (v - 1) / 4 for v in x]
        s = math.sin(math.pi * w[0]) ** 2 + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)
        return s + sum((wi - 1) ** 2 * (1 + 10 * math.sin(math.pi * wi + 1) ** 2) for wi in w[:-1])
    if fam == "styblinski":  # minimum -39.16599 d at x_i = -2.903534
        return 0.5 * sum(v ** 4 - 16 * v * v + 5 * v for v in x)
    if fam == "ackley_rot":  # minimum 0 at the origin
        return (-20 * math.exp(-0.2 * math.sqrt(sum(v * v for v in x) / d))
                - math.exp(sum(math.cos(2 * math.pi * v) for v in x) / d) + 20 + math.e)
    if fam == "zakharov":  # a bowl with coupled dimensions, minimum 0 at the origin
        s2 = sum(0.5 * (i + 1) * v for i, v in enumerate(x))
        return sum(v * v for v in x) + s2 ** 2 + s2 ** 4
    raise SystemExit(f"unknown family {fam}")


def minimum(name):
    """(the minimiser, the minimum value) of NAME, for `check`."""
    fam, d, seed, _ = FUNCS[name]
    if fam in ("ellipsoid", "rosen", "rastrigin_shift", "cigar", "rastrigin_rot", "alpine_shift", "salomon_shift"):
        return shift(d, seed, BOX[fam]), 0.0
    if fam == "dixon_price": return [2 ** (-(2 ** i - 2) / 2 ** i) for i in range(1, d + 1)], 0.0
    if fam == "schwefel": return [420.968746] * d, 0.0
    if fam == "levy": return [1.0] * d, 0.0
    if fam == "styblinski": return [-2.903534] * d, -39.16616570377142 * d
    return [0.0] * d, 0.0


def space(name):
    fam, d, _, _ = FUNCS[name]
    return {f"x{i + 1}": {"distribution": "uniform", "min": -BOX[fam], "max": BOX[fam]} for i in range(d)}


def params_to_x(name, p):
    return [float(p[f"x{i + 1}"]) for i in range(FUNCS[name][1])]


def optuna_best(name, sampler, trials, seeds):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sp, best = space(name), []
    for s in seeds:
        smp = optuna.samplers.TPESampler(seed=s) if sampler == "tpe" else optuna.samplers.RandomSampler(seed=s)
        st = optuna.create_study(direction="minimize", sampler=smp)
        st.optimize(lambda t: value(name, [t.suggest_float(k, v["min"], v["max"]) for k, v in sp.items()]),
                    n_trials=trials)
        best.append(st.best_value)
    return best


def main():
    a = sys.argv[1:]
    if not a or a[0] in ("-h", "--help"): print(__doc__); return
    if a[0] == "list":
        print("\n".join(n for n, f in FUNCS.items() if len(a) < 2 or f[3] == a[1])); return
    if a[0] not in ("check",) and (len(a) < 2 or a[1] not in FUNCS):
        raise SystemExit(f"unknown function {a[1] if len(a) > 1 else ''!r}; known: {', '.join(FUNCS)}")
    if a[0] == "space": print(json.dumps(space(a[1]))); return
    if a[0] == "trial":
        p = {k.lstrip("-"): v for k, _, v in (s.partition("=") for s in a[2:])}
        v = value(a[1], params_to_x(a[1], p))
        print(json.dumps({"step": 1, "value": v})); print(json.dumps({"final": True, "value": v})); return
    if a[0] == "serve":
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(value(a[1], params_to_x(a[1], json.loads(line)))), flush=True)
        return
    if a[0] == "check":
        for n in FUNCS:
            xs, fmin = minimum(n)
            v = value(n, xs)
            ok = abs(v - fmin) < 1e-4 * max(1.0, abs(fmin))
            print(f"{n}: f(x*) = {v:.6g}, expected {fmin:.6g} {'ok' if ok else 'WRONG'}")
            if not ok: sys.exit(1)
        return
    if a[0] == "optuna":
        opts = dict(zip(a[2::2], a[3::2]))
        lo, _, hi = opts.get("--seeds", "1-8").partition("-")
        trials, sampler = int(opts.get("--trials", 40)), opts.get("--sampler", "tpe")
        best = optuna_best(a[1], sampler, trials, range(int(lo), int(hi or lo) + 1))
        print(json.dumps({"function": a[1], "sampler": sampler, "trials": trials, "best": best})); return
    raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
