#!/usr/bin/env bash
# The LM mixtures of models/results/lm.md, each scored with models/default's network and
# warps as of 5c28c34: alpha/beta tuned on TTS dev (30 trials), then her dev prompts.
#   bash models/results/lm/variants.sh   # after `make_default.sh lm` wrote data/lm/wordnet.txt
#                                        # and other_texts.py wrote data/lm/other/
# One thread per score; the table's rows ran two at a time beside a training run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
H=.venv/bin/harken
L=data/corpus/lm_text.txt W=data/lm/wordnet.txt O=data/lm/other
SMALL="$O/handbook.txt $O/devil.txt $O/jargon.txt $O/anarchism.txt $O/bofh-excuses.txt"
declare -A MIX=(
  [A]="$L"
  [B]="$L $W $SMALL $O/gcide.txt"
  [F]="$L $W $SMALL"
  [D]="$L*3 $W $SMALL"
  [H]="$L*5 $W $SMALL"
  [I]="$L*3 $W $O/devil.txt $O/jargon.txt $O/anarchism.txt $O/bofh-excuses.txt"
  [J]="$L*3 $W"
)
score() {  # NAME MIX [build-lm flags]
  local d=runs/lm/m_$1 mix=$2
  shift 2
  # shellcheck disable=SC2086  # the mix is a list of FILE[*N]
  $H build-lm --text $mix --quantize 8 --out "$d" "$@" > /dev/null
  cp models/default/model.safetensors models/default/config.json "$d/"
  OMP_NUM_THREADS=1 $H tune-lm --bundle "$d" --manifest data/corpus/dev.jsonl --trials 30 \
    --alpha 0.2 1.5 --beta 0 3.5 | tail -2 | head -1
  $H eval --bundle "$d" --manifest data/asterisk/dev.jsonl --beam --threads 1 --out "$d/real_dev.json" \
    | grep overall
}
for name in A B F D H I J; do
  echo "== $name"; score "$name" "${MIX[$name]}" --order 4 --prune 0 0 1
done
echo "== J unpruned"; score J0 "${MIX[J]}" --order 4 --prune 0
echo "== J 5-gram"; score J5 "${MIX[J]}" --order 5 --prune 0 0 1
# the oracle: the fortunes plus the dev, test and real-dev transcripts themselves, unpruned
.venv/bin/python -c "
import json, sys
for f in sys.argv[1:]:
    for line in open(f):
        print(json.loads(line)['text'])" data/corpus/dev.jsonl data/corpus/test.jsonl \
  data/asterisk/dev.jsonl > runs/lm/oracle_extra.txt
$H build-lm --text $L runs/lm/oracle_extra.txt --order 4 --prune 0 --quantize 8 --out runs/lm/oracle > /dev/null
cp models/default/model.safetensors models/default/config.json runs/lm/oracle/
OMP_NUM_THREADS=1 $H tune-lm --bundle runs/lm/oracle --manifest data/corpus/dev.jsonl --trials 20 \
  --alpha 0.2 2.0 --beta 0 3.5 --dry-run | tail -1
# beam widths with the shipped LM, one after another, nothing else running
for bw in 96 192 384 768; do
  $H eval --bundle models/default --manifest data/corpus/dev.jsonl --beam --beam-width $bw \
    --threads 1 --out runs/lm/beam$bw.json | grep overall
done
