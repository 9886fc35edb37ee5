#!/usr/bin/env bash
# Soft targets on the synthetic clips only (issue 81): does a per-frame KL term towards the old
# pair's output (TTS dev 23.7%, twice a network's cost), on the TTS corpus alone, keep or lift
# the synthetic voices while the real clips teach the actors through CTC? Two arms side by
# side, a thread each, the same budget, from models/default on stage 6's mix:
#   bash experiments/soft_tts/run.sh targets          # the pair's log-probs on data/corpus/train
#   ARM=control bash experiments/soft_tts/run.sh train &
#   ARM=soft bash experiments/soft_tts/run.sh train &
#   bash experiments/soft_tts/run.sh read           # both arms' best, raw and 1:1 with models/default,
#                                                  # beside models/default on Queen dev and TTS dev
# Each arm resumes from its checkpoint when run again. The KL term on the output (training/
# distill.py SoftTargets, kind "log_probs" targets) was not adopted and left the product: `train`
# runs the trainer of commit a5d7a93, which has it, in a worktree (both arms, so that the only
# difference between them is the term).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
WT=${WT:-/tmp/harken_a5d7a93}
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
    [ -d "$WT" ] || git worktree add -f "$WT" a5d7a93
    ln -sfn "$ROOT/data" "$WT/data"
    ln -sfn "$ROOT/runs" "$WT/runs"
    cd "$WT"
    PYTHONPATH=. $PY harken_cli.py train \
      --train data/games/queen/train.jsonl*2 data/games/sky/train.jsonl data/packs/train.jsonl*4 \
      data/corpus/train.jsonl data/asterisk/train.jsonl*4 \
      --dev data/games/queen/dev.jsonl --out "runs/soft_$ARM" \
      --init-from "${INIT:-$ROOT/models/default}" --model-config scripts/net_mel_3x512.json --device cpu \
      --precision auto --batch-size 16 --lr "${LR:-2e-4}" --warmup-steps 100 --epochs 1000 \
      --time-budget-s "${BUDGET_S:-3000}" --workers 1 --checkpoint-every 100 --dev-every 500 \
      --strategy alternated --sortagrad false --ema-decay 0.998 --threads "${THREADS:-1}" \
      --augment-preset light --p-lowpass 0.25 --p-telephone 0.15 --p-8bit 0.1 "${SOFT[@]}"
    ;;
  read)
    # fp32 (bf16 is emulated, so slow, on a CPU without it); every bundle in the same run
    O=runs/soft_eval
    mkdir -p "$O"
    for a in control soft; do
      RUN=runs/soft_$a CAND=runs/soft_${a}_bundle bash experiments/real_people/campaign.sh bundle
      [ -d runs/softsoup_$a ] || OUT=runs/softsoup_$a bash experiments/real_people/campaign.sh soup \
        runs/soft_${a}_bundle models/default
    done
    for b in models/default runs/soft_control_bundle runs/soft_soft_bundle runs/softsoup_control \
      runs/softsoup_soft; do
      n=$(basename "$b")
      for set in data/games/queen/dev data/corpus/dev; do
        s=$(basename "$(dirname "$set")")_$(basename "$set")
        [ -f "$O/${n}_$s.json" ] || .venv/bin/harken eval --bundle "$b" --manifest "$set.jsonl" \
          --beam --dtype "${DTYPE:-fp32}" --out "$O/${n}_$s.json" > /dev/null
      done
    done
    for n in soft_control_bundle soft_soft_bundle softsoup_control softsoup_soft; do
      for s in queen_dev corpus_dev; do
        echo "== $n against models/default, $s"
        .venv/bin/harken compare "$O/default_$s.json" "$O/${n}_$s.json" | tail -3
      done
    done
    for s in queen_dev corpus_dev; do
      echo "== soft against control, $s (raw, then soups)"
      .venv/bin/harken compare "$O/soft_control_bundle_$s.json" "$O/soft_soft_bundle_$s.json" | tail -3
      .venv/bin/harken compare "$O/softsoup_control_$s.json" "$O/softsoup_soft_$s.json" | tail -3
    done
    ;;
  *) sed -n '2,11p' "$0"; exit 2 ;;
esac
