#!/usr/bin/env bash
# Cache-hit load test of the API on this machine (loopback only): a fresh database, `understudy serve`, a few cached
# predictions seeded through the analytic estimator and a burst worker, then loadgen.py: 60 s at 200 requests/s
# (half GET /v1/predictions/{id}, half cached POST /v1/predictions), then rising rates (20 s each) until p99 passes
# 25 ms, an error appears or the server falls behind. Results go to $OUT (default benchmarks/load/out/).
#
#   benchmarks/load/run.sh                 # WORKERS=2 uvicorn processes, RATE=200, DURATION=60
#   WORKERS=1 RATE=200 benchmarks/load/run.sh
#   WORKERS=1 SEQUENTIAL=2000 DURATION=0 FIND_MAX=0 benchmarks/load/run.sh   # one request at a time: CPU per request
#   PORT=8091 DB=understudy_load_me REDIS_URL=redis://127.0.0.1:6391/9 benchmarks/load/run.sh   # on a shared machine
#
# Needs PostgreSQL on 127.0.0.1:5432 (user root, trust) and a Redis (REDIS_URL, default database 9 on 6379). The
# database DB (default understudy_load) is dropped and made again, and REDIS_URL's database is flushed: point both at
# ones nobody else uses. The code served is this checkout's (PYTHONPATH), whichever checkout the venv installed.
# Authentication and owners are on as shipped: every request carries the key, every read checks that the key owns
# the prediction.
set -euo pipefail
cd "$(dirname "$0")/../.."

WORKERS=${WORKERS:-2}
PORT=${PORT:-8077}
RATE=${RATE:-200}
DURATION=${DURATION:-60}
FIND_MAX=${FIND_MAX:-1}
STEP_DURATION=${STEP_DURATION:-20}
START=${START:-300}
STEP=${STEP:-100}
SEQUENTIAL=${SEQUENTIAL:-0}
OUT=${OUT:-benchmarks/load/out}
DB=${DB:-understudy_load}
mkdir -p "$OUT"

export DATABASE_URL="postgresql://root@127.0.0.1:5432/$DB"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/9}
# The load comes from one key and one address: keep the rate limiter in the path (at these limits each process takes
# 50 requests per Redis call: app/limits.py) but with limits the test cannot reach.
export UNDERSTUDY_RATE_LIMIT_PER_KEY=1000000000 UNDERSTUDY_RATE_LIMIT_PER_IP=1000000000
export UNDERSTUDY_READ_LIMIT_PER_KEY=1000000000 UNDERSTUDY_READ_LIMIT_PER_IP=1000000000
# seed.py queues its predictions before it runs a burst worker, so no worker is alive when they are posted.
export UNDERSTUDY_REQUIRE_LIVE_WORKER=false
export UNDERSTUDY_RECONCILE_INTERVAL_S=60

psql -h 127.0.0.1 -U root -d postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h 127.0.0.1 -U root -d postgres -qc "CREATE DATABASE $DB"
redis-cli -u "$REDIS_URL" flushdb >/dev/null
.venv/bin/alembic upgrade head >/dev/null 2>&1
KEY=$(.venv/bin/understudy keys create --name load 2>/dev/null)

.venv/bin/understudy serve --port "$PORT" --workers "$WORKERS" --log-level warning > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
uptime > "$OUT/uptime.txt"
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.5; done

.venv/bin/python benchmarks/load/seed.py --url "http://127.0.0.1:$PORT" --key "$KEY" --out "$OUT/seed.json"
rm -f "$OUT/runs.jsonl" "$OUT/sequential.jsonl"
# The server and its uvicorn workers, whose CPU per request the runs report.
read -r -a PIDS <<< "$SERVER $(pgrep -P "$SERVER" | tr '\n' ' ')"
if [ "$SEQUENTIAL" != 0 ]; then
  .venv/bin/python benchmarks/load/sequential.py --url "http://127.0.0.1:$PORT" --seed "$OUT/seed.json" \
    --requests "$SEQUENTIAL" --pids "${PIDS[@]}" --out "$OUT/sequential.jsonl"
fi
if [ "$DURATION" != 0 ]; then
  .venv/bin/python benchmarks/load/loadgen.py --url "http://127.0.0.1:$PORT" --seed "$OUT/seed.json" \
    --rate "$RATE" --duration "$DURATION" --server-pids "${PIDS[@]}" --out "$OUT/runs.jsonl"
fi
if [ "$FIND_MAX" = 1 ]; then
  .venv/bin/python benchmarks/load/loadgen.py --url "http://127.0.0.1:$PORT" --seed "$OUT/seed.json" \
    --find-max --start "$START" --step "$STEP" --duration "$STEP_DURATION" --server-pids "${PIDS[@]}" \
    --out "$OUT/runs.jsonl"
fi
uptime >> "$OUT/uptime.txt"
