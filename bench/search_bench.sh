#!/usr/bin/env bash
# Search and early-termination benchmarks, each beside its peer in the same run
# (docs/benchmarks.md, "Search and early termination").
#
#   bench/search_bench.sh [BUILD_DIR]      (default: build; needs search_bench, stopping_bench)
#
# 1. Search quality: swept's bayes, tpe and random against Optuna's TPE and
#    random sampler (../shared/bench/search_peer.py, Debian's python3-optuna),
#    5 functions, 40 trials, seeds 1-8, one trial at a time; median best.
#    1b. The same on bench/search_shapes_peer.py's functions (issue 28: rotated ill-conditioned
#    and many-minima shapes), its tune, holdout and unseen sets apart, evaluated by the peer's serve mode.
# 2. Parallel search: the same with 4 slots (oldest pending trial finishes first).
# 3. Suggestion latency at 100, 1,000, 10,000 finished trials, beside Optuna's TPE.
# 4. Steps saved by hyperband, asha and median on synthetic learning curves.
# Prints Markdown tables; the raw JSON lines are kept in $OUT_DIR (default a temp dir).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
peer="$here/../../shared/bench/search_peer.py"
[[ -f $peer ]] || peer="$here/../shared/bench/search_peer.py"
[[ -f $peer ]] || { echo "search_bench.sh: ../shared/bench/search_peer.py not found" >&2; exit 2; }
/usr/bin/python3 -c "import optuna" 2>/dev/null || {
  echo "search_bench.sh: Debian's python3-optuna is missing (scripts/install-deps.sh --bench)" >&2; exit 2; }
out=${OUT_DIR:-$(mktemp -d)}
echo "machine: $(nproc) cores, $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC'); load at start:$(uptime | sed 's/.*load average://')"
echo "raw results: $out"

functions="branin hartmann6 rosenbrock4 ackley5 nnlike"
: > "$out/peer.jsonl"
for f in $functions; do
  for s in tpe random; do
    /usr/bin/python3 "$peer" optuna "$f" --sampler "$s" --trials 40 --seeds 1-8 >> "$out/peer.jsonl"
  done
done
"$build/bin/search_bench" quality "$peer" --trials 40 --seeds 1-8 --slots 1 > "$out/swept1.jsonl"
"$build/bin/search_bench" quality "$peer" --trials 40 --seeds 1-8 --slots 4 --methods bayes,tpe > "$out/swept4.jsonl"
shapes="$here/search_shapes_peer.py"
: > "$out/shapes_peer.jsonl"
for f in $(python3 "$shapes" list); do
  /usr/bin/python3 "$shapes" optuna "$f" --sampler tpe --trials 40 --seeds 1-8 >> "$out/shapes_peer.jsonl"
done
"$build/bin/search_bench" quality "$shapes" --functions "$(python3 "$shapes" list | paste -sd,)" --trials 40 --seeds 1-8 \
  --methods bayes,tpe > "$out/shapes.jsonl"
python3 "$shapes" list holdout > "$out/shapes_holdout.txt"
python3 "$shapes" list unseen > "$out/shapes_unseen.txt"
echo "load after quality:$(uptime | sed 's/.*load average://')"
"$build/bin/search_bench" latency "$peer" --sizes 100,1000,10000 > "$out/latency.jsonl"
for f in hartmann6 nnlike; do
  for n in 100 1000 10000; do
    reps=5; [[ $n == 10000 ]] && reps=2
    /usr/bin/python3 -W ignore "$here/search_latency_peer.py" "$peer" "$f" "$n" "$reps" >> "$out/latency_peer.jsonl"
  done
done
echo "load after latency:$(uptime | sed 's/.*load average://')"
"$build/bin/stopping_bench" --seeds 1-8 > "$out/stopping.jsonl"

/usr/bin/python3 - "$out" <<'EOF'
import json, statistics, sys, collections
out = sys.argv[1]
rows = lambda f: [json.loads(l) for l in open(f"{out}/{f}") if l.startswith("{")]
med = {}
for r in rows("peer.jsonl"): med[(r["function"], "optuna-" + r["sampler"], 1)] = statistics.median(r["best"])
for f in ("swept1.jsonl", "swept4.jsonl"):
    for r in rows(f): med[(r["function"], r["method"], r["slots"])] = statistics.median(r["best"])
fns = ["branin", "hartmann6", "rosenbrock4", "ackley5", "nnlike"]
print("\n### Search quality: median best of 40 trials over seeds 1-8 (lower is better), one trial at a time\n")
print("| function | swept bayes | swept tpe | swept random | Optuna TPE | Optuna random | bayes <= Optuna TPE | tpe <= Optuna TPE |")
print("|---|---|---|---|---|---|---|---|")
wins = collections.Counter()
for f in fns:
    b, t, r, ot, orr = (med[(f, m, 1)] for m in ("bayes", "tpe", "random", "optuna-tpe", "optuna-random"))
    rnd = min(r, orr)
    wins["bayes"] += b <= ot; wins["tpe"] += t <= ot
    wins["bayes_rand"] += b < rnd; wins["tpe_rand"] += t < rnd
    print(f"| {f} | {b:.4g} | {t:.4g} | {r:.4g} | {ot:.4g} | {orr:.4g} | {'yes' if b <= ot else 'no'} | {'yes' if t <= ot else 'no'} |")
print(f"\nbayes at least as good as Optuna TPE on {wins['bayes']}/5, better than both randoms on {wins['bayes_rand']}/5; "
      f"tpe: {wins['tpe']}/5 and {wins['tpe_rand']}/5.")
print("\n### Shapes of issue 28 (bench/search_shapes_peer.py): median best of 40 trials over seeds 1-8\n")
print("| function | set | swept bayes | swept tpe | Optuna TPE | bayes <= Optuna TPE | tpe <= Optuna TPE |")
print("|---|---|---|---|---|---|---|")
holdout = set(open(f"{out}/shapes_holdout.txt").read().split())
unseen = set(open(f"{out}/shapes_unseen.txt").read().split())
shp = {r["function"]: statistics.median(r["best"]) for r in rows("shapes_peer.jsonl")}
shm = {(r["function"], r["method"]): statistics.median(r["best"]) for r in rows("shapes.jsonl")}
for f, ot in shp.items():
    b, t = shm[(f, "bayes")], shm[(f, "tpe")]
    print(f"| {f} | {'holdout' if f in holdout else 'unseen' if f in unseen else 'tune'} | {b:.4g} | {t:.4g} | {ot:.4g} | {'yes' if b <= ot else 'no'} | {'yes' if t <= ot else 'no'} |")
print("\n### Parallel search: 4 slots against 1 (median best of 40 trials, seeds 1-8)\n")
print("| function | bayes 1 slot | bayes 4 slots | tpe 1 slot | tpe 4 slots |")
print("|---|---|---|---|---|")
for f in fns:
    print(f"| {f} | {med[(f,'bayes',1)]:.4g} | {med[(f,'bayes',4)]:.4g} | {med[(f,'tpe',1)]:.4g} | {med[(f,'tpe',4)]:.4g} |")
print("\n### Suggestion latency: median ms of one suggestion, wall (thread CPU)\n")
print("| function | finished trials | swept bayes | swept tpe | Optuna TPE (default) | Optuna TPE (multivariate, constant liar) |")
print("|---|---|---|---|---|---|")
lat = {}
for r in rows("latency.jsonl"): lat[(r["function"], r["finished"], r["method"])] = (statistics.median(r["ms"]), statistics.median(r["cpu_ms"]))
for r in rows("latency_peer.jsonl"): lat[(r["function"], r["finished"], r["sampler"])] = (statistics.median(r["ms"]), statistics.median(r["cpu_ms"]))
for f in ("hartmann6", "nnlike"):
    for n in (100, 1000, 10000):
        g = lambda m: "%.2f (%.2f)" % lat.get((f, n, m), (float("nan"), float("nan")))
        print(f"| {f} | {n:,} | {g('bayes')} | {g('tpe')} | {g('optuna-tpe')} | {g('optuna-tpe-multivariate-liar')} |")
print("\n### Early termination: 81 trials x 81 steps, 8 slots, seeds 1-8\n")
print("Best kept three ways: the lowest logged last value (noise sd 0.01 included: the top trials' true finals differ by less,")
print("so this names one of several near-equal trials by chance); the best true (noiseless) last value; and the kept best")
print("within the noise of the true best (regret <= 0.01), the honest measure.\n")
print("| curves | rule | settings | steps saved (median) | best kept (logged value) | best kept (true value) | within noise | worst true regret |")
print("|---|---|---|---|---|---|---|---|")
agg = collections.defaultdict(list)
for r in rows("stopping.jsonl"): agg[(r["family"], r["rule"])].append(r)
for (fam, rule), v in agg.items():
    cfg = {k: x for k, x in (v[0]["config"] or {}).items() if k != "type"}
    print(f"| {fam} | {rule} | {json.dumps(cfg) if cfg else '-'} | {100*statistics.median(x['saved'] for x in v):.1f} % | "
          f"{sum(x['best_kept'] for x in v)}/{len(v)} | {sum(x['regret'] == 0 for x in v)}/{len(v)} | "
          f"{sum(x['within_noise'] for x in v)}/{len(v)} | {max(x['regret'] for x in v):.4f} |")
EOF
echo "load at end:$(uptime | sed 's/.*load average://')"
