#!/usr/bin/python3
"""Peer for suggestion latency: Optuna's TPESampler (Debian's python3-optuna) asked for one
suggestion in a study that already holds N finished trials, on the spaces of
../shared/bench/search_peer.py. Used by bench/search_bench.sh.

  search_latency_peer.py PEER_SCRIPT FUNCTION N [REPEATS]
      prints {"function", "sampler", "finished", "ms": [...], "cpu_ms": [...]} for Optuna's default TPESampler and
      for TPESampler(multivariate=True, constant_liar=True) (swept's tpe settings).
"""
import importlib.util, json, random, sys, time

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution


def main():
    peer_path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    spec = importlib.util.spec_from_file_location("search_peer", peer_path)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    space = peer.SPACES[name]
    dists = {}
    for k, d in space.items():
        if "values" in d:
            dists[k] = CategoricalDistribution(d["values"])
        elif d["distribution"] == "int_uniform":
            dists[k] = IntDistribution(d["min"], d["max"])
        else:
            dists[k] = FloatDistribution(d["min"], d["max"], log=d["distribution"] == "log_uniform_values")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rng = random.Random(1)
    history = []
    for _ in range(n):
        params = {}
        for k, d in dists.items():
            if isinstance(d, CategoricalDistribution):
                params[k] = rng.choice(d.choices)
            elif isinstance(d, IntDistribution):
                params[k] = rng.randint(d.low, d.high)
            else:
                params[k] = rng.uniform(d.low, d.high)
        history.append(optuna.trial.create_trial(params=params, distributions=dists, value=peer.value(name, params)))
    for label, sampler in (("optuna-tpe", optuna.samplers.TPESampler(seed=1)),
                           ("optuna-tpe-multivariate-liar",
                            optuna.samplers.TPESampler(seed=1, multivariate=True, constant_liar=True))):
        study = optuna.create_study(sampler=sampler)
        study.add_trials(history)
        times, cpu = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.thread_time()
            trial = study.ask(dists)
            times.append((time.perf_counter() - t0) * 1000.0)
            cpu.append((time.thread_time() - c0) * 1000.0)
            study.tell(trial, peer.value(name, trial.params))
        print(json.dumps({"function": name, "sampler": label, "finished": n, "ms": times, "cpu_ms": cpu}), flush=True)


if __name__ == "__main__":
    main()
