#!/usr/bin/env bash
# Distilling the old pair into one network on the real-people mix (issue 81 item 3), against
# the same time budget without it. Soft targets (a per-frame KL term towards a teacher
# bundle's mixed output, beside CTC) left the product in the consolidation; both arms run the
# trainer of commit 13cc3b3, which still has them, so that the only difference is the term.
#   bash experiments/real_people/distill.sh setup   # worktree at 13cc3b3, the pair at 4cc9070
#   ARM=control bash experiments/real_people/distill.sh train &
#   ARM=distill bash experiments/real_people/distill.sh train &    # side by side, a thread each
# Each arm resumes from its checkpoint when run again. Both start from models/default (the
# one-network soup) on Queen train x2, Sky train, the TTS corpus and her prompts x4, with the
# campaign's band augmentation; the teacher is the pair that was models/default until
# c0242e5, heard without its warps (the trainer's teacher skips them on training voices).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
WT=${WT:-/tmp/harken_13cc3b3}
case "${1:-}" in
  setup)
    [ -d "$WT" ] || git worktree add -f "$WT" 13cc3b3
    # the teacher in bf16, as the student trains (13cc3b3 loaded it in float32, 4x a step's
    # cost on one thread; its outputs are targets, so bf16 is ample)
    sed -i 's/load_networks(bundle, device=device)$/load_networks(bundle, device=device, dtype=torch.bfloat16)/' \
      "$WT/training/soft_targets.py"
    ln -sfn "$ROOT/data" "$WT/data"
    ln -sfn "$ROOT/runs" "$WT/runs"
    mkdir -p runs/pair
    [ -f runs/pair/wide/model.safetensors ] ||
      git archive 4cc9070 models/default | tar -x -C runs/pair --strip-components=2
    ;;
  train)
    ARM=${ARM:?control or distill}
    SOFT=()
    [ "$ARM" = distill ] && SOFT=(--soft-teacher runs/pair --soft-weight "${SOFT_W:-1}")
    cd "$WT"
    "$ROOT/.venv/bin/python" harken_cli.py train \
      --train data/games/queen/train.jsonl*2 data/games/sky/train.jsonl \
      data/corpus/train.jsonl data/asterisk/train.jsonl*4 \
      --dev data/games/queen/dev.jsonl --out "runs/real3_$ARM" \
      --init-from "$ROOT/models/default" --model-config scripts/net_mel_3x512.json --device cpu \
      --precision auto --batch-size 16 --lr "${LR:-2e-4}" --warmup-steps 100 --epochs 1000 \
      --time-budget-s "${BUDGET_S:-3000}" --workers 1 --checkpoint-every 100 --dev-every 400 \
      --strategy alternated --sortagrad false --ema-decay 0.998 --threads "${THREADS:-1}" \
      --augment-preset light --p-lowpass 0.25 --p-telephone 0.15 --p-8bit 0.1 "${SOFT[@]}"
    ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
