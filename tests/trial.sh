#!/bin/sh
# A trial for the integration tests, behaving as --mode says:
#   normal       sleep --secs, then print --steps metric lines, exit 0
#   exit_now     exit 0 at once, printing nothing
#   fail         print to stderr, exit 3
#   bigline      print 3 MB without a newline, then one metric line, exit 0
#   silent       sleep --secs, print nothing, exit 0
#   ignore_term  ignore SIGTERM and sleep 30 s (the agent must SIGKILL it)
#   slow_stop    writes --dir/up-$SWEPT_TRIAL_ID and sleeps; on SIGTERM it
#                stops only once --dir/release exists (a trial with a long
#                checkpoint to write), then exits 143
#   checkpoint   a resumable trial: counts its runs in --dir/runs-$SWEPT_TRIAL_ID;
#                run number --finish_on prints one metric line and exits 0;
#                earlier runs write --dir/ready-ID-RUN, sleep --secs, and on
#                SIGTERM write --dir/ckpt-ID (the run) and exit 143
mode=normal secs=0 steps=3 dir=. finish_on=2
for a in "$@"; do
  case $a in
    --mode=*) mode=${a#*=} ;;
    --secs=*) secs=${a#*=} ;;
    --steps=*) steps=${a#*=} ;;
    --dir=*) dir=${a#*=} ;;
    --finish_on=*) finish_on=${a#*=} ;;
  esac
done
case $mode in
  normal)
    sleep "$secs"
    i=1
    while [ "$i" -le "$steps" ]; do
      printf '{"step": %d, "loss": %d.5}\n' "$i" "$((steps - i))"
      i=$((i + 1))
    done
    exit 0 ;;
  exit_now) exit 0 ;;
  fail) echo "boom" >&2; exit 3 ;;
  bigline)
    head -c 3000000 /dev/zero | tr '\0' x
    printf '\n{"step": 1, "loss": 0.25}\n'
    exit 0 ;;
  silent) sleep "$secs"; exit 0 ;;
  ignore_term) trap '' TERM; sleep 30; exit 0 ;;
  slow_stop)
    trap 'while [ ! -e "$dir/release" ]; do sleep 0.05; done; exit 143' TERM
    : > "$dir/up-${SWEPT_TRIAL_ID:?}"
    sleep 60 &
    wait $!
    exit 0 ;;
  checkpoint)
    id=${SWEPT_TRIAL_ID:?}
    run=$(( $(cat "$dir/runs-$id" 2>/dev/null || echo 0) + 1 ))
    echo "$run" > "$dir/runs-$id"
    if [ "$run" -ge "$finish_on" ]; then
      printf '{"step": 1, "loss": 0.5, "run": %d}\n' "$run"
      exit 0
    fi
    trap 'echo "$run" > "$dir/ckpt-$id"; exit 143' TERM
    : > "$dir/ready-$id-$run"
    sleep "$secs" &
    wait $!
    exit 0 ;;
esac
echo "unknown mode $mode" >&2
exit 2
