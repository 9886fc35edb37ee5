#!/usr/bin/env bash
# Read a trained wide network as the pair's second network, against the shipped pair, on both
# dev sets (the readings of kokoro_en.md's wideenglish2 and widemix2 tables):
#
#   bash models/results/kokoro_en/read_wide.sh OUT WIDE_BUNDLE SHARE [SOUP_WITH]
#
# copies models/default to runs/OUT, puts WIDE_BUNDLE's weights in its wide/ (or, with
# SOUP_WITH, a 1:1 soup of the two), sets the wide network's share, evaluates data/corpus and
# data/asterisk dev with the beam, and writes paired comparisons against the shipped pair's
# readings (models/results/default_eval_{dev,real_dev}.json) to runs/OUT_cmp_{corpus,asterisk}.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1 wide=$2 share=$3 soup=${4:-}
d=runs/$out
rm -rf "$d" && cp -r models/default "$d"
if [ -n "$soup" ]; then
  tmp=$(mktemp -d)
  .venv/bin/python models/results/soup/soup.py "$tmp/soup" "$wide" "$soup" >/dev/null
  cp "$tmp/soup/model.safetensors" "$d/wide/" && rm -rf "$tmp"
else
  cp "$wide/model.safetensors" "$d/wide/"
fi
.venv/bin/python - "$d/config.json" "$share" <<'PY'
import json, sys
path, share = sys.argv[1], float(sys.argv[2])
config = json.load(open(path))
config["ensemble"]["members"][0]["weight"] = share
open(path, "w").write(json.dumps(config, indent=1) + "\n")
PY
for s in corpus asterisk; do
  .venv/bin/harken eval --bundle "$d" --manifest data/$s/dev.jsonl --beam --threads 2 \
    --out "runs/${out}_$s.json" >/dev/null
done
.venv/bin/harken compare models/results/default_eval_dev.json "runs/${out}_corpus.json" \
  --out "runs/${out}_cmp_corpus.md"
.venv/bin/harken compare models/results/default_eval_real_dev.json "runs/${out}_asterisk.json" \
  --out "runs/${out}_cmp_asterisk.md"
