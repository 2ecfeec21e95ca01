#!/usr/bin/env bash
# Emulator throughput: live OpenAI chat completions served per second on loopback,
# measured with Debian's wrk (apt-get install -y wrk) as a separate load generator.
#
#   bench/emulator_wrk.sh [duration=10s] [connections=64] [threads=2] [port=18765]
#
# Starts `agac emulator` (latency 0), waits until it answers, runs wrk with a POST body
# against /v1/chat/completions, checks that the emulator counted every request, and
# stops the server it started (by its pid).
set -euo pipefail

DURATION=${1:-10s}
CONNECTIONS=${2:-64}
THREADS=${3:-2}
PORT=${4:-18765}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
OUT=$ROOT/bench/out
mkdir -p "$OUT"

command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }

"$PYTHON" -c "from agac.emulator.server import serve; serve(port=$PORT)" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT

for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$PORT/_emulator/health" >/dev/null 2>&1 && break
  sleep 0.1
done

cat > "$OUT/chat.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer emulator-key"
wrk.body = '{"model": "gpt-4o-mini", "max_completion_tokens": 200, "messages": [' ..
  '{"role": "system", "content": "You label product reviews."}, ' ..
  '{"role": "user", "content": "Classify this review: the kettle broke after two days."}], ' ..
  '"response_format": {"type": "json_schema", "json_schema": {"name": "label", "schema": ' ..
  '{"type": "object", "properties": {"sentiment": {"enum": ["pos", "neg", "neutral"]}}, ' ..
  '"required": ["sentiment"]}}}}'
LUA

curl -fs -X DELETE "http://127.0.0.1:$PORT/_emulator/stats" >/dev/null
# Warm up, then measure.
wrk -t1 -c8 -d2s -s "$OUT/chat.lua" "http://127.0.0.1:$PORT/v1/chat/completions" >/dev/null
curl -fs -X DELETE "http://127.0.0.1:$PORT/_emulator/stats" >/dev/null
echo "# wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency -s chat.lua POST /v1/chat/completions"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$OUT/chat.lua" \
  "http://127.0.0.1:$PORT/v1/chat/completions" | tee "$OUT/emulator_wrk.txt"
echo "# emulator stats after the run:"
curl -fs "http://127.0.0.1:$PORT/_emulator/stats" | "$PYTHON" -c \
  'import json,sys; s=json.load(sys.stdin); print("requests counted:", s["requests"], "answered:", s["answered"])'
