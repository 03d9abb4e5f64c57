#!/usr/bin/env python3
"""Why swept's tpe and Debian's Optuna 3.1 TPE differ (docs/benchmarks.md, "Search quality").

  /usr/bin/python3 bench/tpe_peer_variants.py FUNCTION VARIANT SEED_LO SEED_HI

VARIANT: uni (the peer: Optuna 3.1's default TPESampler), mv (multivariate=True),
uni-fixed / mv-fixed (the same with the truncated normal's log-density given its
missing -log(scale) term, as later Optuna has it). Same functions and spaces as
../shared/bench/search_peer.py, 40 trials, one at a time. Prints one JSON line with
the median best and the best per seed.
"""
import importlib.util, json, os, statistics, sys, warnings

warnings.filterwarnings("ignore")
here = os.path.dirname(os.path.abspath(__file__))
peer_path = next(p for p in (os.path.join(here, "..", "..", "shared", "bench", "search_peer.py"),
                             os.path.join(here, "..", "shared", "bench", "search_peer.py")) if os.path.exists(p))
spec = importlib.util.spec_from_file_location("search_peer", peer_path)
peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer)

import numpy as np
import optuna
import optuna.samplers._tpe.parzen_estimator as parzen

optuna.logging.set_verbosity(optuna.logging.ERROR)
name, variant, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if variant.endswith("-fixed"):
    logpdf_31 = parzen.truncnorm.logpdf
    # Optuna 3.1's _truncnorm.logpdf standardises x but does not subtract log(scale).
    parzen.truncnorm.logpdf = lambda x, a, b, loc=0, scale=1: logpdf_31(x, a, b, loc=loc, scale=scale) - np.log(scale)
space = peer.SPACES[name]


def suggest(t):
    p = {}
    for k, d in space.items():
        if "values" in d: p[k] = t.suggest_categorical(k, d["values"])
        elif d["distribution"] == "int_uniform": p[k] = t.suggest_int(k, d["min"], d["max"])
        elif d["distribution"] == "log_uniform_values": p[k] = t.suggest_float(k, d["min"], d["max"], log=True)
        else: p[k] = t.suggest_float(k, d["min"], d["max"])
    return p


best = []
for seed in range(lo, hi + 1):
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=variant.startswith("mv"))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.optimize(lambda t: peer.value(name, suggest(t)), n_trials=40)
    best.append(study.best_value)
print(json.dumps({"function": name, "variant": variant, "seeds": f"{lo}-{hi}", "median": statistics.median(best), "best": best}))
