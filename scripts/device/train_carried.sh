#!/usr/bin/env bash
# Train on a lent GPU machine from what one call can carry (64 MiB): the corpus as 10 kbit/s
# Opus in one blob (pack_corpus.py), the initial weights as int8 (carry_weights.py), and the
# wheels the machine lacks. The EMA bundle comes back in $OUT (return_bundle.sh), and beside it
# (best.*) the bundle of the run's lowest dev CER, which a long call can pass well before its
# end (experiments/gpu.md, call 8). detach.sh runs it past one call's limit.
# A corpus larger than one call comes in several packs: earlier calls on the same warm machine
# leave theirs in an ignored folder (stash_pack.sh), named in PACKS; every pack's *_train.jsonl
# trains (asterisk's x8, or HER times; TIMES="queen_train=2 packs_train=4 ..." sets any
# manifest's count by its packed name), and dev is DEV (default /tmp/data/corpus_dev.jsonl),
# which one of them carries. The real-people recipe: experiments/real_people/README.md.
# Usage (on the machine, from the repo root):
#   [PACKS="runs/pack1 ..."] [TIMES=...] [DEV=...] train_carried.sh CARRY_DIR BUDGET_S [train flags...]
set -uo pipefail
C=${1:?carry dir} BUDGET=${2:?budget seconds}; shift 2
for p in ${PACKS:-}; do
  [ -f "$p/corpus.bin" ] || { echo "pack $p is not on this machine (was it given back?)"; exit 3; }
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$C"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, soundfile, soxr; print('torch', torch.__version__, 'libsndfile', soundfile.__libsndfile_version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || exit 1
t0=$(date +%s)
for p in "$C/corpus" ${PACKS:-}; do
  python3 scripts/device/unpack_corpus.py "$p" /tmp/data || exit 1
done
python3 scripts/device/carry_weights.py unpack "$C/init" /tmp/init || exit 1
echo "unpacked in $(( $(date +%s) - t0 )) s"
declare -A times=([asterisk_train]=${HER:-8})
for kv in ${TIMES:-}; do times[${kv%%=*}]=${kv#*=}; done
TRAIN=()
for m in /tmp/data/*_train.jsonl; do
  n=$(basename "$m" .jsonl)
  TRAIN+=("$m*${times[$n]:-1}")
done
DEV=${DEV:-/tmp/data/corpus_dev.jsonl}
[ -f "$DEV" ] || { echo "dev manifest $DEV is not in the packs"; exit 1; }
echo "train: ${TRAIN[*]}"
timeout $(( BUDGET + 150 )) python3 harken_cli.py train --train "${TRAIN[@]}" --dev "$DEV" \
  --out /tmp/run --init-from /tmp/init --device cuda --time-budget-s "$BUDGET" "$@" 2>&1 \
  | tr '\r' '\n' | grep -v '%|'
echo "train exit ${PIPESTATUS[0]} after $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
if [ -n "${OUT:-}" ]; then bash scripts/device/return_bundle.sh /tmp/run; fi
