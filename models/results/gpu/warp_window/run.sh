#!/usr/bin/env bash
# The speaker-warp window swept on the shipped model (greedy, no LM): dev CER by how many
# output frames of speech a stream hears before it keeps one warp (models/results/gpu/README.md)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
for d in 100 67 50 33 20; do
  .venv/bin/harken tune-warp --bundle models/default --manifest data/corpus/dev.jsonl \
    --candidates off 0.8,1.0 --decide-frames $d --dry-run --out models/results/gpu/warp_window/tts_dev_$d.json
done
.venv/bin/harken tune-warp --bundle models/default --manifest data/asterisk/dev.jsonl \
  --candidates off 0.8,1.0 --decide-frames 67 --dry-run --out models/results/gpu/warp_window/her_dev_67.json
