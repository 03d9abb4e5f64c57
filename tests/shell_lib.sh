# Helpers shared by the shell tests that run swept as real processes
# (chaos_test.sh, netns_test.sh, slurm_test.sh). Sourced, not run.

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
