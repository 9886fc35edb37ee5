#!/bin/bash
# Start-up warm-up, all shapes before /readyz against the rest in the background: 10 and 20
# real-time streams started the moment the server is ready, 30 s each, in interleaved pairs
# (all first in round 1, background first in round 2), TTS dev utterances so test stays
# unseen. Run from the repository root with nothing else running; appends one line per run to
# summary.txt here.
#   bash experiments/loadtest/warmup/run.sh
# ROUNDS="3 4" LEVELS=20 runs more rounds of one level (odd rounds start with all).
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=experiments/loadtest/warmup
out=/tmp/warmup_ab
export MANIFEST=data/corpus/dev.jsonl
cpu=$(.venv/bin/python -c "from server.precision import cpu_description; print(cpu_description())")
echo "# $(date -u +%F' '%H:%M) UTC; CPU: $cpu; torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')" >> $here/summary.txt
for round in ${ROUNDS:-1 2}; do
  a=all b=background
  [ $((round % 2)) = 0 ] && a=background b=all
  for n in ${LEVELS:-10 20}; do
    for w in $a $b; do
      bash scripts/loadtest_ab.sh "${w}_${n}_$round" "$n" 30 "--warmup $w" "$out" | tee -a $here/summary.txt
    done
  done
done
