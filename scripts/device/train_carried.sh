#!/usr/bin/env bash
# Train on a lent GPU machine from what one call can carry (64 MiB): the corpus as 10 kbit/s
# Opus in one blob (pack_corpus.py), the initial weights as int8 (carry_weights.py), and the
# wheels the machine lacks. The EMA bundle comes back in $OUT, split under the 16 MB file limit.
# Usage (on the machine, from the repo root): train_carried.sh CARRY_DIR BUDGET_S [train flags...]
set -uo pipefail
C=${1:?carry dir} BUDGET=${2:?budget seconds}; shift 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$C"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, soundfile, soxr; print('torch', torch.__version__, 'libsndfile', soundfile.__libsndfile_version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || exit 1
t0=$(date +%s)
python3 scripts/device/unpack_corpus.py "$C/corpus" /tmp/data || exit 1
python3 scripts/device/carry_weights.py unpack "$C/init" /tmp/init || exit 1
echo "unpacked in $(( $(date +%s) - t0 )) s"
timeout $(( BUDGET + 150 )) python3 harken_cli.py train --train /tmp/data/corpus_train.jsonl \
  /tmp/data/kokoro_train.jsonl '/tmp/data/asterisk_train.jsonl*8' --dev /tmp/data/corpus_dev.jsonl \
  --out /tmp/run --init-from /tmp/init --device cuda --time-budget-s "$BUDGET" "$@" 2>&1 \
  | tr '\r' '\n' | grep -v '%|'
echo "train exit ${PIPESTATUS[0]} after $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
if [ -n "${OUT:-}" ] && [ -f /tmp/run/bundle/model.safetensors ]; then
  cp /tmp/run/bundle/config.json /tmp/run/bundle/CARD.md "$OUT/"; cp /tmp/run/log.jsonl "$OUT/" 2>/dev/null
  split -b 15M /tmp/run/bundle/model.safetensors "$OUT/model.safetensors.part-"
  ls -la "$OUT"
fi
