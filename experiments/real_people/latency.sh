#!/usr/bin/env bash
# 10 and 60 real-time streams against one bundle served on this machine (the load generator
# beside it), TTS dev utterances: bash experiments/real_people/latency.sh BUNDLE OUT [SECONDS]
# (SERVE_ARGS="--dtype int8" adds harken serve flags; LEVELS="10" runs other levels). OUT.metrics
# keeps the server's step and narrowed-search counts after the run: narrowed searches over
# the sum of batch sizes (stream steps) is the share of decoder calls that searched narrower.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$1 OUT=$2 SECONDS_PER_LEVEL=${3:-40} PORT=${PORT:-8011}
.venv/bin/harken serve --bundle "$B" --port "$PORT" --warmup all ${SERVE_ARGS:-} >"$OUT.server.log" 2>&1 &
PID=$!
# the server is gone before this script is: the next run's readiness wait must not find it
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 1; done
rc=0
.venv/bin/harken loadtest --url "ws://127.0.0.1:$PORT" --manifest data/corpus/dev.jsonl \
  --streams "${LEVELS:-10,60}" --seconds "$SECONDS_PER_LEVEL" --progress-s 0 --out "$OUT" \
  --note "${NOTE:-nothing else ran}" || rc=$?
curl -sf "http://127.0.0.1:$PORT/metrics" | grep -E '^harken_(narrowed_searches|batch_size_(sum|count)) ' \
  >"$OUT.metrics" || true
exit $rc
