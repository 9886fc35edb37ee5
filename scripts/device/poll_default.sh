#!/usr/bin/env bash
# Watch the detached training run for up to WAIT seconds (it stops early when training ends),
# then copy its latest bundle and logs to $OUT (the model split in pieces under 16 MB).
set -uo pipefail
WAIT=${1:-500}
WORK=/root/harken-train
end=$(( $(date +%s) + WAIT ))
while [ "$(date +%s)" -lt "$end" ] && pgrep -f "harken_cli.py train" >/dev/null; do sleep 10; done
pgrep -f "harken_cli.py train" >/dev/null && echo "training still running" || echo "training finished"
tr '\r' '\n' <"$WORK/train.out" | grep -v '%|' | tail -15
grep -E '"wer"' "$WORK/run/log.jsonl" | tail -5
tail -2 "$WORK/run/log.jsonl"
if [ -n "${OUT:-}" ] && [ -f "$WORK/run/bundle/model.safetensors" ]; then
  cp "$WORK/run/bundle/config.json" "$WORK/run/bundle/CARD.md" "$WORK/run/log.jsonl" "$OUT/"
  cp "$WORK/corpus/stats.json" "$OUT/corpus_stats.json"
  split -b 15M "$WORK/run/bundle/model.safetensors" "$OUT/model.safetensors.part-"
  ls -la "$OUT"
fi
