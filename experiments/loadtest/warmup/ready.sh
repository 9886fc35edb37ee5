#!/bin/bash
# Time to /readyz for `harken serve` with the given flags, a REST transcript at once, then
# (WAIT s later) the warm-up log lines, step shapes and the server process's RSS. Run with
# nothing else running: WAIT=30 bash experiments/loadtest/warmup/ready.sh [--warmup all]
cd "$(dirname "$0")/../../.."
port=$((8100 + RANDOM % 500))
t0=$(date +%s.%N)
.venv/bin/harken serve --port $port "$@" > /tmp/serve.log 2>&1 &
pid=$!
until curl -sf localhost:$port/readyz >/dev/null; do sleep 0.05; done
t1=$(date +%s.%N)
echo "flags: $* ; ready $(echo "$t1 - $t0" | bc) s"
t2=$(date +%s.%N)
curl -s -F model=x -F file=@data/asterisk/audio/privacy-prompt.wav localhost:$port/v1/audio/transcriptions; echo
echo "first transcript $(echo "$(date +%s.%N) - $t2" | bc) s"
sleep ${WAIT:-40}
grep -i "warm-up" /tmp/serve.log
curl -s localhost:$port/metrics | grep '^harken_step_shapes'
grep VmRSS /proc/$pid/status
kill -INT $pid; wait $pid 2>/dev/null
