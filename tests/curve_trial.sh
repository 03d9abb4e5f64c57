#!/bin/sh
# A trial printing a learning curve, for the early-termination tests:
# loss = FLOOR + 1/step for steps 1..--steps. A trial with --floor above 1 is
# a clearly worse one and prints slowly (--slow seconds a line), so that its
# sweep's early_terminate rule has the time to stop it; the others print
# --fast seconds a line.
floor=1 steps=40 fast=0.02 slow=0.25
for a in "$@"; do
  case $a in
    --floor=*) floor=${a#*=} ;;
    --steps=*) steps=${a#*=} ;;
    --fast=*) fast=${a#*=} ;;
    --slow=*) slow=${a#*=} ;;
  esac
done
delay=$(awk -v f="$floor" -v a="$fast" -v b="$slow" 'BEGIN { print (f > 1 ? b : a) }')
i=1
while [ "$i" -le "$steps" ]; do
  awk -v f="$floor" -v i="$i" 'BEGIN { printf "{\"step\": %d, \"loss\": %.6f}\n", i, f + 1 / i }'
  sleep "$delay"
  i=$((i + 1))
done
exit 0
