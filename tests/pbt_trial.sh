#!/bin/sh
# A population-based-training member for the pbt tests (issue 29): theta
# climbs by --lr each step and the metric is q = theta. Its checkpoint is one
# line "step theta" in $SWEPT_CHECKPOINT_DIR/state, written at every step
# through a rename (never half written); a segment resumes from it, with
# whatever --lr its command now carries. At $SWEPT_PBT_STOP_STEP it saves and
# waits for the scheduler's SIGTERM, so its checkpoint is the interval's.
# Each start appends "trial attempt start_step lr" to $PBT_LEDGER. The pause
# between steps is 0.01 s, or what the file $PBT_DELAY_FILE holds when it
# exists, read at every step (a test speeds up or slows down one host's
# members that way, while they run). For bench/pbt_exploit.sh: with
# $PBT_CKPT_BYTES the checkpoint also holds a file of that many random bytes
# (made by the first segment, carried by every copy), and with $PBT_TIMES
# each start and each report of the stop step append "start|reach trial
# attempt step nanoseconds" there.
lr=0.1 steps=100 delay=0.01
for a in "$@"; do
  case $a in
    --lr=*) lr=${a#*=} ;;
    --steps=*) steps=${a#*=} ;;
  esac
done
dir=$SWEPT_CHECKPOINT_DIR
step=0 theta=0
[ -f "$dir/state" ] && read -r step theta <"$dir/state"
echo "$SWEPT_TRIAL_ID $SWEPT_ATTEMPT $step $lr" >>"$PBT_LEDGER"
[ -n "${PBT_TIMES:-}" ] && echo "start $SWEPT_TRIAL_ID $SWEPT_ATTEMPT $step $(date +%s%N)" >>"$PBT_TIMES"
if [ -n "${PBT_CKPT_BYTES:-}" ] && [ ! -f "$dir/blob" ]; then
  head -c "$PBT_CKPT_BYTES" /dev/urandom >"$dir/.blob.tmp" && mv "$dir/.blob.tmp" "$dir/blob"
fi
trap 'exit 0' TERM
while [ "$step" -lt "$steps" ]; do
  step=$((step + 1))
  theta=$(awk -v t="$theta" -v l="$lr" 'BEGIN { printf "%.6f", t + l }')
  echo "$step $theta" >"$dir/state.tmp" && mv "$dir/state.tmp" "$dir/state"
  echo "{\"step\": $step, \"q\": $theta}"
  if [ "$step" -eq "${SWEPT_PBT_STOP_STEP:-0}" ]; then
    [ -n "${PBT_TIMES:-}" ] && echo "reach $SWEPT_TRIAL_ID $SWEPT_ATTEMPT $step $(date +%s%N)" >>"$PBT_TIMES"
    while :; do sleep 0.05; done  # saved at the interval: wait for the stop
  fi
  [ -n "${PBT_DELAY_FILE:-}" ] && [ -f "$PBT_DELAY_FILE" ] && read -r delay <"$PBT_DELAY_FILE"
  sleep "$delay"
done
