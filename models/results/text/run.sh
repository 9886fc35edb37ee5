#!/usr/bin/env bash
# The two measurements of models/results/text.md, on the model shipped before it (gpu3):
# 1. new text in known voices: greedy CER on data/probe (`make_default.sh probe`), sentences no
#    corpus trained on, spoken by the training voices;
# 2. the leak: TTS dev and test without the 31 sentences that data/kokoro's train split had
#    read before it was rebuilt with --exclude (its old manifest: data/kokoro/train.jsonl.with_leak)
set -euo pipefail
cd "$(dirname "$0")/../../.."
# B: gpu3, the model shipped before gpu4 (git worktree add /tmp/gpu3 e83b75b; B=/tmp/gpu3/models/default)
R=models/results/text B=${B:?the gpu3 bundle}
.venv/bin/harken eval --bundle $B --manifest data/probe/train.jsonl --out $R/probe_train_eval.json
for s in dev test; do
  .venv/bin/python - data/kokoro/train.jsonl.with_leak data/corpus/$s.jsonl /tmp/${s}_clean.jsonl <<'PY'
import json, sys
from pathlib import Path
leaked = {json.loads(line)["text"] for line in open(sys.argv[1])}
src = Path(sys.argv[2]).resolve()
with open(sys.argv[3], "w") as out:
    for line in open(src):
        row = json.loads(line)
        if row["text"] not in leaked:
            out.write(json.dumps({**row, "audio": str(src.parent / row["audio"])}) + "\n")
PY
  .venv/bin/harken eval --bundle $B --manifest /tmp/${s}_clean.jsonl --beam \
    --out $R/${s}_without_leaked_eval.json
done
