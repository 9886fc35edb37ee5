#!/bin/bash
# one-thread decoder tuning of a candidate bundle beside a training run, then both dev sets:
#   bash models/results/ensemble/tune_look.sh BUNDLE OUT  (tune-lm writes into BUNDLE)
set -u
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
L=$1; OUT=$2
mkdir -p $OUT
.venv/bin/harken tune-lm --bundle $L --manifest data/corpus/dev.jsonl --trials ${TRIALS:-40} --alpha 0.2 1.5 --beta 0 3.5 \
  --blank-penalty 0 0.5 0.75 1 1.5 > $OUT/tune.log 2>&1
.venv/bin/harken eval --bundle $L --manifest data/corpus/dev.jsonl --beam --threads 1 --out $OUT/dev.json > $OUT/dev.log 2>&1
.venv/bin/harken eval --bundle $L --manifest data/asterisk/dev.jsonl --beam --threads 1 --out $OUT/real_dev.json > $OUT/real_dev.log 2>&1
echo done >> $OUT/tune.log
