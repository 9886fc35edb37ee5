#!/bin/bash
# One load level against a server started with the given flags, summarised in one line: for
# side-by-side comparisons of server settings (interleave the runs; near the ceiling a level
# swings a lot between runs on a shared machine, so compare pairs run back to back).
#   bash scripts/loadtest_ab.sh NAME STREAMS SECONDS "serve flags" [OUT_DIR]
# e.g. bash scripts/loadtest_ab.sh fixed 100 25 "--load-chunk-ms 0"
# MANIFEST= picks the utterances (default data/corpus/test.jsonl; a dev set keeps test unseen);
# SEED= changes which ones each stream sends, and when (the same seed sends the same ones);
# MAX_UTTERANCE_S= lets longer ones in (the load test skips those over 20 s). The server warms
# every step shape before it answers ready (`--warmup all`; a --warmup in the flags wins), so
# the load does not share its first seconds with start-up's background warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 streams=$2 seconds=$3 flags=$4 out=${5:-/tmp/loadtest_ab}
port=$(.venv/bin/python -c "from loadtest.launch import free_port; print(free_port())")
mkdir -p "$out"
# shellcheck disable=SC2086  # flags is a list
.venv/bin/harken serve --port "$port" --max-streams 400 --log-level warning --warmup all $flags \
  > "$out/$name.server.log" 2>&1 &
server=$!
trap 'kill -INT $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "localhost:$port/readyz" > /dev/null && break
  sleep 0.5
done
.venv/bin/harken loadtest --url "ws://127.0.0.1:$port" --manifest "${MANIFEST:-data/corpus/test.jsonl}" \
  --streams "$streams" --seconds "$seconds" --progress-s 0 ${SEED:+--seed "$SEED"} \
  ${MAX_UTTERANCE_S:+--max-utterance-s "$MAX_UTTERANCE_S"} --out "$out/$name" > /dev/null 2>&1 || true
curl -sf "localhost:$port/metrics" > "$out/$name.metrics" || true  # the server's own counts
.venv/bin/python - "$out/$name" "$name" <<'PY'
import json, sys
from pathlib import Path
out, name = Path(sys.argv[1]), sys.argv[2]
r = json.loads((out / "results.json").read_text())["results"][0]
d = json.loads((out / "details.json").read_text())["levels"][0]
sizes = r["batch_sizes"]
requests = sum(int(b) * n for b, n in sizes.items())
mean = sum(int(b) ** 2 * n for b, n in sizes.items()) / max(requests, 1)
print(
    f"{name:14s} streams {r['streams']} utterances {r['utterances']} failures {r['failures']} "
    f"p50 {r['p50_ms']} p98 {r['p98_ms']} ms; server p50 {d['server_p50_ms']} "
    f"p98 {d['server_p98_ms']} ms; mean batch {mean:.1f}; WER {r['wer']}; "
    f"load generator {100 * d['loadgen_cpu_share']:.1f}% of the cores"
)
PY
