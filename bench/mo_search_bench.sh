#!/usr/bin/env bash
# Multi-objective search beside its peers in the same run (docs/benchmarks.md, "Several objectives").
#
#   bench/mo_search_bench.sh [BUILD_DIR]     (default: build; needs mo_search_bench)
#
# 1. Quality: the hypervolume of all 100 trials' values against each function's reference point,
#    swept's nsga2, tpe, bayes and random against Optuna's NSGAIISampler, TPESampler and
#    RandomSampler (Debian's python3-optuna), seeds 1-8, one trial at a time; the median per
#    function. The functions: zdt1, zdt2, dtlz2 (../shared/bench/search_peer.py) and zdt3,
#    fonseca3, dtlz2x4 (bench/mo_extra_peer.py, nothing tuned on them).
# 2. The same for swept with 4 trials in flight (SLOTS4=0 skips it).
# 3. Suggestion latency after 1,000 finished trials, 2 objectives (zdt1) and 3 (dtlz2).
# Prints Markdown tables; the raw JSON lines are kept in $OUT_DIR (default a temp dir).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
peer="$here/../../shared/bench/search_peer.py"
[[ -f $peer ]] || peer="$here/../shared/bench/search_peer.py"
[[ -f $peer ]] || { echo "mo_search_bench.sh: ../shared/bench/search_peer.py not found" >&2; exit 2; }
extra="$here/mo_extra_peer.py"
/usr/bin/python3 -c "import optuna" 2>/dev/null || {
  echo "mo_search_bench.sh: Debian's python3-optuna is missing (scripts/install-deps.sh --bench)" >&2; exit 2; }
out=${OUT_DIR:-$(mktemp -d)}
echo "machine: $(nproc) cores, $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC'); load at start:$(uptime | sed 's/.*load average://')"
echo "raw results: $out"
: > "$out/peer.jsonl"
for s in nsga2 tpe random; do
  for f in zdt1 zdt2 dtlz2; do /usr/bin/python3 "$peer" optuna $f --sampler $s --trials 100 --seeds 1-8 >> "$out/peer.jsonl"; done
  for f in zdt3 fonseca3 dtlz2x4; do /usr/bin/python3 "$extra" optuna $f --sampler $s --trials 100 --seeds 1-8 >> "$out/peer.jsonl"; done
done
"$build/bin/mo_search_bench" quality "$peer" --functions zdt1,zdt2,dtlz2 > "$out/swept1.jsonl"
"$build/bin/mo_search_bench" quality "$extra" --functions zdt3,fonseca3,dtlz2x4 >> "$out/swept1.jsonl"
: > "$out/swept4.jsonl"
if [[ ${SLOTS4:-1} != 0 ]]; then
  "$build/bin/mo_search_bench" quality "$peer" --functions zdt1,zdt2,dtlz2 --slots 4 --methods nsga2,tpe,bayes > "$out/swept4.jsonl"
  "$build/bin/mo_search_bench" quality "$extra" --functions zdt3,fonseca3,dtlz2x4 --slots 4 --methods nsga2,tpe,bayes >> "$out/swept4.jsonl"
fi
"$build/bin/mo_search_bench" latency "$peer" --sizes 1000 > "$out/latency.jsonl"
echo "load at end:$(uptime | sed 's/.*load average://')"

/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = lambda f: [json.loads(l) for l in open(f"{out}/{f}") if l.startswith("{")]
med = {}
for r in rows("peer.jsonl"): med[(r["function"], "optuna-" + r["sampler"], 1)] = statistics.median(r["hypervolume"])
for f in ("swept1.jsonl", "swept4.jsonl"):
    for r in rows(f): med[(r["function"], r["method"], r["slots"])] = statistics.median(r["hypervolume"])
fns = ["zdt1", "zdt2", "dtlz2", "zdt3", "fonseca3", "dtlz2x4"]
mine = ("nsga2", "tpe", "bayes", "random")
theirs = ("optuna-nsga2", "optuna-tpe", "optuna-random")
print("\n### Median hypervolume of 100 trials, seeds 1-8, one trial at a time (higher is better)\n")
print("| function | " + " | ".join("swept " + m for m in mine) + " | Optuna NSGA-II | Optuna TPE | Optuna random | swept best >= Optuna best |")
print("|---|" + "---|" * (len(mine) + len(theirs) + 1))
for f in fns:
    v = [med.get((f, m, 1), float("nan")) for m in mine + theirs]
    ours, peer = max(v[:3]), max(v[4:6])
    print(f"| {f} | " + " | ".join(f"{x:.4g}" for x in v) + f" | {'yes' if ours >= peer else 'no'} ({ours / peer:.3f}) |")
if rows("swept4.jsonl"):
    print("\n### 4 trials in flight against 1 (median hypervolume, swept)\n")
    print("| function | nsga2 1 | nsga2 4 | tpe 1 | tpe 4 | bayes 1 | bayes 4 |")
    print("|---|---|---|---|---|---|---|")
    for f in fns:
        print(f"| {f} | " + " | ".join(f"{med.get((f, m, s), float('nan')):.4g}" for m in ("nsga2", "tpe", "bayes") for s in (1, 4)) + " |")
print("\n### Suggestion latency after 1,000 finished trials: median ms, wall (thread CPU)\n")
print("| objectives | nsga2 | tpe | bayes |")
print("|---|---|---|---|")
lat = {(r["objectives"], r["method"]): (statistics.median(r["ms"]), statistics.median(r["cpu_ms"])) for r in rows("latency.jsonl")}
for k in (2, 3):
    print(f"| {k} | " + " | ".join("%.2f (%.2f)" % lat[(k, m)] for m in ("nsga2", "tpe", "bayes")) + " |")
PY
