#!/bin/bash
# The shipped pair in int8 with its 1-D convolutions in int8 too, on two dev sets, then the
# paired bootstrap against int8 with fp32 convolutions and against fp32 (both measured on the
# same CPU kind, loadtest/results/int8_avx2/eval). Run from the repository root with
# int8_conv.patch applied (`git apply loadtest/results/int8_conv/int8_conv.patch`).
#   bash loadtest/results/int8_conv/eval.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=loadtest/results/int8_conv/eval
before=loadtest/results/int8_avx2/eval
mkdir -p $here
for set in corpus asterisk; do
  .venv/bin/harken eval --bundle models/default --manifest data/$set/dev.jsonl --beam \
    --threads 2 --dtype int8 --out $here/int8conv.$set.json
  .venv/bin/harken compare $before/int8.$set.json $here/int8conv.$set.json --out $here/against_int8_$set.md
  .venv/bin/harken compare $before/fp32.$set.json $here/int8conv.$set.json --out $here/against_fp32_$set.md
done
