#!/usr/bin/env bash
# Soft targets on the synthetic clips only (issue 81): does a per-frame KL term towards the old
# pair's output (TTS dev 23.7%, twice a network's cost), on the TTS corpus alone, keep or lift
# the synthetic voices while the real clips teach the actors through CTC? Two arms side by
# side, a thread each, the same budget, from models/default on stage 6's mix:
#   bash experiments/soft_tts/run.sh targets          # the pair's log-probs on data/corpus/train
#   ARM=control bash experiments/soft_tts/run.sh train &
#   ARM=soft bash experiments/soft_tts/run.sh train &
# Each arm resumes from its checkpoint when run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
case "${1:-}" in
  targets)
    mkdir -p runs/pair
    [ -f runs/pair/wide/model.safetensors ] ||
      git archive 4cc9070 models/default | tar -x -C runs/pair --strip-components=2
    PYTHONPATH=. $PY experiments/soft_tts/targets.py runs/pair data/soft_pair data/corpus/train.jsonl \
      --dtype int8 --no-warps
    ;;
  train)
    ARM=${ARM:?control or soft}
    SOFT=()
    [ "$ARM" = soft ] && SOFT=(--teacher data/soft_pair --distill-weight "${W:-1}")
    PYTHONPATH=. $PY harken_cli.py train \
      --train data/games/queen/train.jsonl*2 data/games/sky/train.jsonl data/packs/train.jsonl*4 \
      data/corpus/train.jsonl data/asterisk/train.jsonl*4 \
      --dev data/games/queen/dev.jsonl --out "runs/soft_$ARM" \
      --init-from "${INIT:-models/default}" --model-config scripts/net_mel_3x512.json --device cpu \
      --precision auto --batch-size 16 --lr "${LR:-2e-4}" --warmup-steps 100 --epochs 1000 \
      --time-budget-s "${BUDGET_S:-3000}" --workers 1 --checkpoint-every 100 --dev-every 500 \
      --strategy alternated --sortagrad false --ema-decay 0.998 --threads "${THREADS:-1}" \
      --augment-preset light --p-lowpass 0.25 --p-telephone 0.15 --p-8bit 0.1 "${SOFT[@]}"
    ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
