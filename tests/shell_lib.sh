# Helpers shared by the shell tests that run swept as real processes
# (chaos_test.sh, netns_test.sh, slurm_test.sh, the pbt and gang tests). Sourced, not run.

# wait_for SECONDS 'CONDITION': polls every 50 ms until the shell condition
# holds; the deadline only bounds a hang (the tests never sleep for an event).
# Returns 1 when the deadline passes first.
wait_for() {
  local deadline=$((SECONDS + $1))
  until eval "$2"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# sql 'QUERY': runs QUERY on the test's database, $tmp/swept.db, waiting up
# to 5 s for a writer's lock (the scheduler writes while the test reads).
sql() { sqlite3 -cmd ".timeout 5000" "$tmp/swept.db" "$1"; }

# process_test_setup: what a test of real processes starts
# with: $tmp, a fresh folder removed at exit; $pids, the processes it starts,
# SIGKILLed at exit, then cleanup_more if the test defines it (namespaces,
# say); fail MESSAGE, which prints the tail of every log under
# $tmp and the trials' ledger ($tmp/ledger, if any), then exits 1 (unless the
# test defined a fail of its own before sourcing this file).
process_test_setup() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
        if declare -F cleanup_more >/dev/null; then cleanup_more; fi
        rm -rf "$tmp"' EXIT
}
declare -F fail >/dev/null || fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do echo "== $f" >&2; tail -30 "$f" >&2; done
  [ -f "$tmp/ledger" ] && { echo "== ledger" >&2; sort -k5 "$tmp/ledger" >&2; }
  exit 1
}
