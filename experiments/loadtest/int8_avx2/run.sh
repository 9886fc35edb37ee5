#!/bin/bash
# int8 against fp32 (`--dtype auto`'s choice on a CPU without native bf16 units) on an
# AVX2-only CPU: the shipped pair at 10, 20 and 40 real-time streams, and its first network
# alone at 10, in interleaved pairs (fp32 first in round 1, int8 first in round 2), 40 s each,
# TTS dev utterances so test stays unseen. Run from the repository root with nothing else
# running; appends one line per run to summary.txt here.
#   bash experiments/loadtest/int8_avx2/run.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=experiments/loadtest/int8_avx2
out=/tmp/int8_avx2
export MANIFEST=data/corpus/dev.jsonl
cpu=$(.venv/bin/python -c "from server.precision import cpu_description; print(cpu_description())")
echo "# $(date -u +%F' '%H:%M) UTC; CPU: $cpu; torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')" >> $here/summary.txt
run() {  # NAME STREAMS FLAGS
  bash scripts/loadtest_ab.sh "$1" "$2" 40 "$3" "$out" | tee -a $here/summary.txt
}
for round in 1 2; do
  a=fp32 b=int8
  [ "$round" = 2 ] && a=int8 b=fp32
  for d in $a $b; do run "alone_${d}_10_$round" 10 "--dtype $d --ensemble false"; done
  for n in 10 20 40; do
    for d in $a $b; do run "pair_${d}_${n}_$round" "$n" "--dtype $d"; done
  done
done
