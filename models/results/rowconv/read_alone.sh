#!/usr/bin/env bash
# Read a trained first network alone (`--ensemble false`, the search settings the bundle keeps
# for its own network heard alone) with the shipped warps, LM and search, on the three dev sets:
#
#   bash models/results/rowconv/read_alone.sh OUT FIRST_BUNDLE [THREADS]
#
# Copies models/default to runs/OUT, puts FIRST_BUNDLE's weights and row-convolution
# look-ahead in (the rest of the shipped config stays: warps, merge), and writes
# runs/OUT_{corpus,asterisk,prose}.json (and .md) with the beam.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1 first=$2 threads=${3:-2}
d=runs/$out
case "$(realpath -m "$first")/" in
"$(realpath -m "$d")"/*) echo "read_alone.sh: $first lies inside $d, which this read empties" >&2; exit 2 ;;
esac
rm -rf "$d" && cp -r models/default "$d"
cp "$first/model.safetensors" "$d/"
.venv/bin/python - "$d/config.json" "$first/config.json" <<'PY'
import json, sys
path, source = sys.argv[1], sys.argv[2]
config = json.load(open(path))
config["model"]["row_conv_tau"] = json.load(open(source))["model"]["row_conv_tau"]
open(path, "w").write(json.dumps(config, indent=1) + "\n")
PY
sets=(corpus asterisk)
[ -f data/prose/dev.jsonl ] && sets+=(prose)
for s in "${sets[@]}"; do
  .venv/bin/harken eval --bundle "$d" --manifest data/$s/dev.jsonl --beam --ensemble false \
    --threads "$threads" ${LIMIT:+--limit "$LIMIT"} --out "runs/${out}_$s.json" >/dev/null
done
