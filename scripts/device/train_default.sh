#!/usr/bin/env bash
# Train the default model on a rented GPU machine that has PyTorch but no package registry:
# carried wheels (.whl) and TTS engines (.devcarry/tts.tar.xz, from pack_tts.sh) are installed,
# the corpus is synthesised there with the same seed and arguments as on the CPU machine,
# and `harken train` starts detached so that later calls can poll it (poll_default.sh).
# Usage: train_default.sh BUDGET_SECONDS
set -euo pipefail
BUDGET=${1:-900}
WORK=/root/harken-train
mkdir -p "$WORK"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
bash scripts/device/unpack_tts.sh .devcarry/tts.tar.xz
export PATH=/opt/tts/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
espeak-ng -v en-us -w /tmp/e.wav "hello there" && flite -voice kal -t "hello" -o /tmp/f.wav \
  && echo '(SayText "hello")' >/dev/null && ls -la /tmp/e.wav /tmp/f.wav
t0=$(date +%s)
python3 harken_cli.py synth --out "$WORK/corpus" --workers 16 2>&1 | tr '\r' '\n' | grep -v '%|' | tail -5
echo "synth took $(( $(date +%s) - t0 )) s"
cat "$WORK/corpus/stats.json" | python3 -c "import json,sys; d=json.load(sys.stdin); print({k: (v.get('utterances'), v.get('hours')) for k, v in d.items() if isinstance(v, dict)})"
setsid nohup python3 harken_cli.py train --train "$WORK/corpus/train.jsonl" \
  --dev "$WORK/corpus/dev.jsonl" --out "$WORK/run" --device cuda --precision fp32 \
  --conv-type 2d --conv-layers 2 --conv-channels 16 --conv-time-kernel 5 \
  --rnn-layers 3 --rnn-hidden 512 --row-conv-tau 10 \
  --batch-size 64 --lr 1.5e-3 --warmup-steps 300 --epochs 200 --time-budget-s "$BUDGET" \
  --workers 15 --dev-limit 200 --checkpoint-every 500 --strategy alternated \
  >"$WORK/train.out" 2>&1 </dev/null &
echo "training started (budget $BUDGET s)"
