#!/usr/bin/env bash
# 10 real-time streams for 60 s against each bundle in turn, each server alone on the machine
# usage: run.sh NAME=BUNDLE...  (this folder: gpu4_1 gpu3_1 gpu3_2 gpu4_2, then gpu4_3 gpu3_3; gpu4 was runs/gpu4/candidate, gpu3 models/default before the ship)
set -uo pipefail
cd "$(dirname "$0")/../../../.."
OUTROOT=${OUTROOT:-models/results/gpu/ten_streams_gpu4}
mkdir -p $OUTROOT
port=8020
for spec in "$@"; do
  name=${spec%%=*} bundle=${spec#*=}
  .venv/bin/harken serve --bundle "$bundle" --port $port > $OUTROOT/$name.server.log 2>&1 &
  pid=$!
  for i in $(seq 120); do curl -sf http://127.0.0.1:$port/readyz >/dev/null && break; sleep 1; done
  .venv/bin/harken loadtest --url ws://127.0.0.1:$port --manifest data/corpus/test.jsonl --streams 10 --seconds 60 --out $OUTROOT/$name > $OUTROOT/$name.log 2>&1
  kill $pid; wait $pid 2>/dev/null
  echo $name; grep '^| 10 |' $OUTROOT/$name/report.md
  port=$((port+1))
done
