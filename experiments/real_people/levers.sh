#!/usr/bin/env bash
# Three levers beside the network (issue 81, 2026-12-06), each read against models/default's
# per-utterance reports (`campaign.sh baseline` writes them into results/):
#   bash experiments/real_people/levers.sh real-lm   # the real clips' train transcripts as a
#                                                    # third LM mixed into the search
#   bash experiments/real_people/levers.sh warps     # warped copies averaged, one network
#   bash experiments/real_people/levers.sh her       # her dev under stage 4's search settings
# Bundles go to runs/lever_*, reports to runs/lever_eval; each prints `harken compare` rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
H=${H:-.venv/bin/harken}
O=runs/lever_eval
mkdir -p "$O"

copy_default() { rm -rf "$1" && mkdir -p "$1" && cp models/default/* "$1/"; }

read_dev() {  # BUNDLE TAG SET...: SET is queen_dev, dev (TTS) or real_dev (her)
  local b=$1 tag=$2
  shift 2
  declare -A manifest=([queen_dev]=data/games/queen/dev.jsonl [dev]=data/corpus/dev.jsonl
    [real_dev]=data/asterisk/dev.jsonl)
  for s in "$@"; do
    $H eval --bundle "$b" --manifest "${manifest[$s]}" --beam --dtype bf16 \
      --out "$O/${s}_$tag.json" >/dev/null
    echo "$tag $s $($H compare "results/default_eval_$s.json" "$O/${s}_$tag.json" \
      | grep 'beam | WER')"
  done
}

set_json() {  # FILE PYTHON: edit a bundle's JSON in place (d is the document)
  .venv/bin/python - "$1" "$2" <<'PY'
import json, sys
path, code = sys.argv[1:3]
d = json.load(open(path))
exec(code)
open(path, "w").write(json.dumps(d, indent=2) + "\n")
PY
}

case "${1:-}" in
  real-lm)
    # the Queen's, Sky's and the packs' train transcripts, less any sentence sharing six words
    # with a dev or test transcript (the Queen's included), as a 4-gram mixed in beside the
    # general LM at three shares (own / general / real), then the first re-tuned on TTS dev
    mkdir -p data/lm
    for m in data/games/queen/train.jsonl data/games/sky/train.jsonl data/packs/train.jsonl; do
      .venv/bin/python -c 'import json, sys
for line in open(sys.argv[1]): print(json.loads(line)["text"])' "$m"
    done >data/lm/real_train.raw
    $H lm-text --text data/lm/real_train.raw --out data/lm/real_train.txt --held-out \
      data/corpus/{dev,test}.jsonl data/asterisk/{dev,test}.jsonl \
      data/games/queen/{dev,test}.jsonl data/prose/{dev,test}.jsonl
    LMPLZ=$(.venv/bin/python -c 'from decoder.kenlm_tools import ensure_tools
print(ensure_tools().lmplz)')
    "$LMPLZ" -o 4 --discount_fallback -S 200M -T /tmp <data/lm/real_train.txt \
      >data/lm/real_train.arpa 2>/dev/null
    for shares in "a 0.7 0.1" "b 0.8 0.1" "c 0.6 0.2" "d 0.77 0.03"; do
      read -r v g r <<<"$shares"
      copy_default "runs/lever_lm_$v"
      set_json "runs/lever_lm_$v/decoder.json" \
        "[m.update(weight=$g) for m in d['mix'] if m['lm'] == 'general.binary']"
      $H mix-lm --bundle "runs/lever_lm_$v" --lm data/lm/real_train.arpa --weight "$r" --name real
      read_dev "runs/lever_lm_$v" "lm_$v" queen_dev dev real_dev
    done
    $H tune-lm --bundle runs/lever_lm_a --manifest data/corpus/dev.jsonl --trials 20 \
      --alpha 0.7 1.4 --beta 0.6 2.2 | tail -1
    read_dev runs/lever_lm_a lm_a_tuned queen_dev dev
    ;;
  warps)
    # each stream's copies at these frequency-warp factors, their per-frame outputs averaged
    # (the `warp_merge: mean` the pair once shipped): every factor is one more network step
    for f in 0.8,1.0 0.9,1.0 1.0,1.1 0.9,1.1 0.8,1.0,1.2; do
      t=${f//,/_}
      copy_default "runs/lever_warp_$t"
      set_json "runs/lever_warp_$t/config.json" \
        "d['model'].update(warp_factors=[$f], warp_merge='mean')"
      read_dev "runs/lever_warp_$t" "warp_$t" dev queen_dev
    done
    read_dev runs/lever_warp_0.8_1.0 warp_0.8_1.0 real_dev
    ;;
  her)
    # is her dev's drift (28.77 -> 30.74 -> 33.21% over three defaults) the search's re-tuning?
    copy_default runs/lever_her
    set_json runs/lever_her/decoder.json "d['config'].update(alpha=1.1459, beta=1.0317)"
    read_dev runs/lever_her her_stage4_search real_dev
    ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
