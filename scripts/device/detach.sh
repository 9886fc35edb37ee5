#!/usr/bin/env bash
# One training run longer than a call's 10-minute limit, on a warm lent machine: `start`
# launches train_carried.sh in a session of its own, which outlives the call while the machine
# stays warm (so the next call must follow within its idle release, 30 s), and returns once
# the first steps are logged; `wait` follows it until it ends, then brings its bundles back
# (return_bundle.sh). A `wait` that is still training after MAX_S exits 4 without them, to be
# called again at once, or with FINAL=1 returns what the run has so far (best/ once dev was
# scored). The device time a second start would cost goes to training instead.
# Usage (on the machine, from the repo root):
#   [PACKS=...] detach.sh start CARRY_DIR BUDGET_S [train flags...]
#   [FINAL=1] detach.sh wait MAX_S
set -uo pipefail
LOG=/tmp/detached.log PID=/tmp/detached.pid
case ${1:-} in
  start)
    shift
    rm -rf /tmp/run
    OUT='' setsid nohup bash scripts/device/train_carried.sh "$@" >"$LOG" 2>&1 </dev/null &
    echo $! >"$PID"
    for _ in $(seq 90); do  # a start that breaks shows in this call, not the next
      grep -q '"step"' /tmp/run/log.jsonl 2>/dev/null && break
      kill -0 "$(cat "$PID")" 2>/dev/null || break
      sleep 2
    done
    cat "$LOG"
    kill -0 "$(cat "$PID")" 2>/dev/null || { echo "training is not running"; exit 1; }
    ;;
  wait)
    end=$(($(date +%s) + ${2:?max seconds}))
    while kill -0 "$(cat "$PID")" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
    if kill -0 "$(cat "$PID")" 2>/dev/null; then
      tail -n 30 "$LOG"
      [ -n "${FINAL:-}" ] || { echo "still training after $2 s"; exit 4; }
      echo "still training after $2 s: returning what it has"
    else
      cat "$LOG"
    fi
    bash scripts/device/return_bundle.sh /tmp/run
    ;;
  *)
    echo "usage: detach.sh start CARRY_DIR BUDGET_S [train flags...] | [FINAL=1] detach.sh wait MAX_S"
    exit 2
    ;;
esac
