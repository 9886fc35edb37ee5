#!/bin/bash
# The shipped pair's accuracy in fp32 and in int8 on this CPU (fbgemm's AVX2 kernels), two dev
# sets, then the paired bootstrap of int8 against fp32. Run from the repository root.
#   bash experiments/loadtest/int8_avx2/eval.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=experiments/loadtest/int8_avx2/eval
for set in corpus asterisk; do
  for d in fp32 int8; do
    .venv/bin/harken eval --bundle models/default --manifest data/$set/dev.jsonl --beam \
      --threads 2 --dtype $d --out $here/$d.$set.json
  done
  .venv/bin/harken compare $here/fp32.$set.json $here/int8.$set.json --out $here/compare_$set.md
done
