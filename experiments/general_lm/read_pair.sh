#!/usr/bin/env bash
# Read trained networks as the pair's first and/or second network with the shipped search (the
# general LM mixed in), against the shipped pair, on both dev sets (README.md's readings beside it):
#
#   bash experiments/general_lm/read_pair.sh OUT FIRST_BUNDLE WIDE_BUNDLE SHARE
#
# FIRST_BUNDLE / WIDE_BUNDLE: a bundle whose model.safetensors replaces models/default's first
# network / wide/ network, or - to keep the shipped one; SHARE: the wide network's share. Copies
# models/default to runs/OUT, evaluates data/corpus, data/asterisk and (once built) data/prose
# dev with the beam, and writes paired comparisons against
# results/default_eval_{dev,real_dev,prose_dev}.json to runs/OUT_cmp_{corpus,asterisk,prose}.md.
# ALONE=1 reads the first network alone (`--ensemble false`, the search settings the bundle
# keeps for it) and writes no comparisons (the shipped files are the pair's); THREADS (2) the
# evaluation's threads.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1 first=$2 wide=$3 share=$4
d=runs/$out
# runs/OUT is emptied first: a network to read must not live in it (a training run's own
# folder once was, and its bundle went with it)
for src in "$first" "$wide"; do
  case "$(realpath -m "$src")/" in
  "$(realpath -m "$d")"/*) echo "read_pair.sh: $src lies inside $d, which this read empties; choose another OUT" >&2; exit 2 ;;
  esac
done
rm -rf "$d" && cp -r models/default "$d"
[ "$first" != - ] && cp "$first/model.safetensors" "$d/"
[ "$wide" != - ] && cp "$wide/model.safetensors" "$d/wide/"
# the share, and each replaced network's shape (row-convolution look-ahead, recurrent layers and
# how many are residual: each is part of its weights; the rest of the shipped config stays:
# warps, merge, search)
.venv/bin/python - "$d" "$share" "$first" "$wide" <<'PY'
import json, sys
d, share, first, wide = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
def edit(path, source, share=None):
    config = json.load(open(path))
    if share is not None:
        config["ensemble"]["members"][0]["weight"] = share
    if source != "-":
        model = json.load(open(f"{source}/config.json"))["model"]
        for key in ("row_conv_tau", "rnn_layers", "rnn_residual_layers"):
            config["model"][key] = model.get(key, 0)
    open(path, "w").write(json.dumps(config, indent=1) + "\n")
edit(f"{d}/config.json", first, share)
edit(f"{d}/wide/config.json", wide)
PY
sets=(corpus asterisk)
[ -f data/prose/dev.jsonl ] && sets+=(prose)  # `make_default.sh prose` (experiments/prose.md)
for s in "${sets[@]}"; do
  .venv/bin/harken eval --bundle "$d" --manifest data/$s/dev.jsonl --beam --threads "${THREADS:-2}" \
    ${ALONE:+--ensemble false} --out "runs/${out}_$s.json" >/dev/null
done
[ -n "${ALONE:-}" ] && exit 0
.venv/bin/harken compare results/default_eval_dev.json "runs/${out}_corpus.json" \
  --out "runs/${out}_cmp_corpus.md"
.venv/bin/harken compare results/default_eval_real_dev.json "runs/${out}_asterisk.json" \
  --out "runs/${out}_cmp_asterisk.md"
if [ -f "runs/${out}_prose.json" ]; then
  .venv/bin/harken compare results/default_eval_prose_dev.json "runs/${out}_prose.json" \
    --out "runs/${out}_cmp_prose.md"
fi
