#!/usr/bin/env bash
# The checkpoint contract (docs/checkpoints.md) held by its two example
# programs, as real processes: examples/scripts/torch_checkpoint.py (PyTorch,
# run with /usr/bin/python3, Debian's python3-torch: fails, not skips,
# without it) and examples/scripts/pbt_toy.py (the PBT paper's toy problem).
# For each: SIGTERM in mid-run saves a checkpoint into SWEPT_CHECKPOINT_DIR and
# exits 130 leaving no temporary file; a second run resumes at the next step
# with a changed hyperparameter and says so; a truncated checkpoint is refused
# with exit 2, not taken for a fresh start. For the toy also: a run stopped
# and resumed with the same h ends exactly where an uninterrupted run ends.
# Waits are deadline loops on the programs' output, never fixed sleeps.
# Usage: tests/checkpoint_contract_test.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: checkpoint_contract_test.sh SOURCE_DIR}
py=/usr/bin/python3
tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The step of the last metric line in file $1 (0 when none).
last_step() { { grep -o '"step": [0-9]*' "$1" || true; } | tail -n1 | grep -o '[0-9]*$' || echo 0; }

# Waits (60 s at most) until the process $1 has printed step >= $3 into $2.
wait_for_step() {
  local deadline=$((SECONDS + 60))
  while (( $(last_step "$2") < $3 )); do
    kill -0 "$1" 2>/dev/null || fail "the program ended before step $3: $(cat "$2.err" 2>/dev/null)"
    (( SECONDS < deadline )) || { kill "$1"; fail "no step $3 within 60 s"; }
    sleep 0.05
  done
}

# Runs "$@" in the background with stdout to $out, stderr to $out.err; stops
# it with SIGTERM once it has reported step 20; checks exit 130 and that no
# temporary file is left in $ckpt. Prints the last step it reported.
stop_in_mid_run() {
  SWEPT_CHECKPOINT_DIR=$ckpt "$@" >"$out" 2>"$out.err" &
  pid=$!
  wait_for_step "$pid" "$out" 20
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=
  [[ $rc == 130 ]] || fail "$1 $2: exit $rc after SIGTERM, expected 130: $(cat "$out.err")"
  ! ls -A "$ckpt" | grep -q '^\.' || fail "a temporary file was left in $ckpt: $(ls -A "$ckpt")"
  last_step "$out"
}

# ---- PyTorch -------------------------------------------------------------------
$py -c 'import torch' 2>/dev/null || fail "$py cannot import torch: apt-get install python3-torch (scripts/install-deps.sh)"
ckpt=$tmp/torch; out=$tmp/torch.out; mkdir -p "$ckpt"
torch_prog=$root/examples/scripts/torch_checkpoint.py
stopped=$(stop_in_mid_run $py "$torch_prog" --steps=100000000 --lr=0.01)
[[ -s $ckpt/model.pt ]] || fail "torch: no model.pt after SIGTERM"
SWEPT_CHECKPOINT_DIR=$ckpt $py "$torch_prog" --steps=$((stopped + 5)) --lr=0.02 >"$out" 2>"$out.err" ||
  fail "torch: the resumed run failed: $(cat "$out.err")"
first=$(head -n1 "$out" | grep -o '"step": [0-9]*' | grep -o '[0-9]*$')
[[ $first == $((stopped + 1)) ]] || fail "torch: resumed at step $first, expected $((stopped + 1))"
[[ $(last_step "$out") == $((stopped + 5)) ]] || fail "torch: did not run to step $((stopped + 5))"
grep -q "resumed at step $stopped; changed: lr 0.01 -> 0.02" "$out.err" || fail "torch: no change line: $(cat "$out.err")"
truncate -s 1000 "$ckpt/model.pt"
rc=0; SWEPT_CHECKPOINT_DIR=$ckpt $py "$torch_prog" --steps=100 >"$out" 2>"$out.err" || rc=$?
[[ $rc == 2 ]] || fail "torch: a truncated checkpoint gave exit $rc, expected 2"
grep -q "checkpoint $ckpt/model.pt cannot be read" "$out.err" || fail "torch: unclear message: $(cat "$out.err")"
[[ ! -s $out ]] || fail "torch: metric lines after a truncated checkpoint"
echo "torch: stopped at step $stopped, resumed at $first with lr 0.02, truncated copy refused"

# ---- the PBT toy ---------------------------------------------------------------
ckpt=$tmp/toy; out=$tmp/toy.out; mkdir -p "$ckpt"
toy=$root/examples/scripts/pbt_toy.py
stopped=$(stop_in_mid_run python3 "$toy" --h1=1 --h2=0 --max_steps=100000000 --step_seconds=0.001)
[[ -s $ckpt/toy.json ]] || fail "toy: no toy.json after SIGTERM"
end=$((stopped + 10))
# The same h: the resumed run ends exactly where an uninterrupted one does.
cp -r "$ckpt" "$tmp/toy-copy"
SWEPT_CHECKPOINT_DIR=$ckpt python3 "$toy" --h1=1 --h2=0 --max_steps=$end >"$out" 2>"$out.err" || fail "toy: resume failed"
grep -q "h unchanged" "$out.err" || fail "toy: no resume line: $(cat "$out.err")"
resumed_final=$(tail -n1 "$out")
mkdir -p "$tmp/toy-straight"
SWEPT_CHECKPOINT_DIR=$tmp/toy-straight python3 "$toy" --h1=1 --h2=0 --max_steps=$end >"$tmp/straight.out"
[[ $resumed_final == "$(tail -n1 "$tmp/straight.out")" ]] ||
  fail "toy: stopped and resumed ends with $resumed_final, straight with $(tail -n1 "$tmp/straight.out")"
# A new h (as PBT's explore gives): theta2 starts to move, theta1 is kept.
SWEPT_CHECKPOINT_DIR=$tmp/toy-copy python3 "$toy" --h1=0 --h2=1 --max_steps=$end >"$out" 2>"$out.err"
grep -q "resumed at step $stopped, .*h \[1.0, 0.0\] -> \[0.0, 1.0\]" "$out.err" || fail "toy: no change line: $(cat "$out.err")"
[[ $(head -n1 "$out" | grep -o '"step": [0-9]*') == "\"step\": $((stopped + 1))" ]] || fail "toy: series not continuous"
python3 - "$out" <<'PY' || fail "toy: theta did not move as h = (0, 1) says"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"final"' not in l]
assert rows[0]["theta1"] == rows[-1]["theta1"] < 0.9 and rows[-1]["theta2"] < rows[0]["theta2"] < 0.9, rows
PY
head -c 40 "$ckpt/toy.json" >"$tmp/cut" && mv "$tmp/cut" "$ckpt/toy.json"
rc=0; SWEPT_CHECKPOINT_DIR=$ckpt python3 "$toy" --h1=1 --h2=0 --max_steps=$((end + 5)) >"$out" 2>"$out.err" || rc=$?
[[ $rc == 2 ]] || fail "toy: a truncated checkpoint gave exit $rc, expected 2"
grep -q "fails its check" "$out.err" || fail "toy: unclear message: $(cat "$out.err")"
# SWEPT_PBT_STOP_STEP: it saves at that step and waits for the SIGTERM.
ckpt=$tmp/toy-stop; out=$tmp/toy-stop.out; mkdir -p "$ckpt"
SWEPT_CHECKPOINT_DIR=$ckpt SWEPT_PBT_STOP_STEP=6 python3 "$toy" --h1=1 --h2=1 --max_steps=1000 >"$out" 2>"$out.err" &
pid=$!
deadline=$((SECONDS + 60))
until grep -q '"step": 6' "$ckpt/toy.json" 2>/dev/null; do
  (( SECONDS < deadline )) || fail "toy: no checkpoint at SWEPT_PBT_STOP_STEP=6 within 60 s"
  kill -0 "$pid" 2>/dev/null || fail "toy: ended before its stop step: $(cat "$out.err")"
  sleep 0.05
done
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?; pid=
[[ $rc == 130 ]] || fail "toy: exit $rc after SIGTERM at its stop step"
[[ $(last_step "$out") == 6 ]] || fail "toy: ran past its stop step: $(tail -n1 "$out")"
echo "toy: stopped at step $stopped, resumed bit-exact, new h applied, truncated copy refused, waits at SWEPT_PBT_STOP_STEP"
echo "PASS"
