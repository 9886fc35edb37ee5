#!/usr/bin/env bash
# Which labels for the Amazon Queen's clips (issue 81): the script line that Whisper tiny.en's
# hypothesis found (what `harken prepare queen` keeps), or that hypothesis itself as a
# pseudo-label. Both arms train on the same clips (Queen train), the same mix and budget,
# from models/default; only the Queen clips' text differs.
#   bash experiments/real_people/labels.sh manifest             # Queen train with Whisper's words
#   ARM=script bash experiments/real_people/labels.sh train &
#   ARM=whisper bash experiments/real_people/labels.sh train &  # side by side, a thread each
# Each arm resumes from its checkpoint when run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
Q=data/games/queen
case "${1:-}" in
  manifest)
    .venv/bin/python - "$Q" <<'PY'
import json, sys
from collections import Counter
from pathlib import Path

q = Path(sys.argv[1])
hyp = {}
for line in (q / "labels.jsonl").open():
    row = json.loads(line)
    hyp[row["key"]] = row["hypothesis"]  # normalised as the labels are (corpus/text.py)
rows, same = [], Counter()
for line in (q / "train.jsonl").open():
    row = json.loads(line)
    words = hyp[Path(row["audio"]).stem]
    same[words == row["text"]] += 1
    rows.append({**row, "text": words})
(q / "train_whisper.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
print(f"{len(rows)} clips; Whisper's words equal the label on {same[True]}, differ on {same[False]}")
PY
    ;;
  train)
    ARM=${ARM:?script or whisper}
    QUEEN=$Q/train.jsonl
    [ "$ARM" = whisper ] && QUEEN=$Q/train_whisper.jsonl
    .venv/bin/harken train --train "$QUEEN*2" data/games/sky/train.jsonl \
      data/corpus/train.jsonl data/asterisk/train.jsonl*4 \
      --dev $Q/dev.jsonl --out "runs/labels_$ARM" \
      --init-from models/default --model-config scripts/net_mel_3x512.json --device cpu \
      --precision auto --batch-size 16 --lr 2e-4 --warmup-steps 100 --epochs 1000 \
      --time-budget-s "${BUDGET_S:-2400}" --workers 1 --checkpoint-every 100 --dev-every 400 \
      --strategy alternated --sortagrad false --ema-decay 0.998 --threads 1 \
      --augment-preset light --p-lowpass 0.25 --p-telephone 0.15 --p-8bit 0.1
    ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
