#!/usr/bin/env bash
# Bring a run's bundles back from a lent machine in $OUT, under its limits (8 files of at most
# 16 MB, 64 MiB in all): the last bundle and the lowest-dev-CER one (best.*) as fp16 weights
# (carry_weights.py half; `full` restores them here), each split under 15 MB, with the log and
# the last bundle's card: 8 files for a 3 x GRU 768 network.
# Usage (on the machine, from the repo root): return_bundle.sh RUN_DIR
set -uo pipefail
RUN=${1:?run dir}
[ -n "${OUT:-}" ] || { echo "no \$OUT to return into"; exit 2; }
for kind in bundle best; do
  [ -f "$RUN/$kind/model.safetensors" ] || { echo "$RUN/$kind has no weights"; continue; }
  prefix=; [ $kind = best ] && prefix=best.
  python3 scripts/device/carry_weights.py half "$RUN/$kind" "/tmp/return_$kind" || exit 1
  cp "$RUN/$kind/config.json" "$OUT/${prefix}config.json"
  split -b 15M "/tmp/return_$kind/model.fp16.safetensors" "$OUT/${prefix}model.fp16.safetensors.part-"
done
cp "$RUN/log.jsonl" "$RUN/bundle/CARD.md" "$OUT/" 2>/dev/null
ls -la "$OUT"
