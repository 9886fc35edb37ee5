#!/bin/bash
# The blank-penalty probe of dropout.md: a read_pair.sh ALONE copy (runs/NET) read on TTS dev
# with its alone search at other blank penalties.  bash blank_probe.sh NET TAG PENALTY...
set -euo pipefail
cd "$(dirname "$0")/../../.."
net=$1 tag=$2; shift 2
for bp in "$@"; do
  d=runs/bp_${tag}_$bp
  rm -rf $d && cp -r runs/$net $d
  .venv/bin/python - $d $bp <<'PY'
import json,sys
d,bp=sys.argv[1],float(sys.argv[2])
c=json.load(open(f"{d}/config.json")); c["ensemble"]["alone"]["blank_penalty"]=bp
open(f"{d}/config.json","w").write(json.dumps(c,indent=1)+"\n")
PY
  .venv/bin/harken eval --bundle $d --manifest data/corpus/dev.jsonl --beam --threads 1 --ensemble false --out runs/bp_${tag}_$bp.json > /dev/null 2>&1
  python3 -c "import json;d=json.load(open('runs/bp_${tag}_$bp.json'));print('$tag',$bp,round(d['decoders']['beam']['overall']['wer']*100,2))"
done
