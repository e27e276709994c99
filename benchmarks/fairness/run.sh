#!/usr/bin/env bash
# Fairness under a flood, on this machine (loopback only): a fresh database, `understudy serve`, WORKERS CPU workers
# (the analytic estimator), then flood.py: key A posts FLOOD heavy requests (mvitv2_huge_cls, 64 inline targets),
# key B then posts one cheap prediction; the report is how long B's job waited. Results go to $OUT.
#
#   benchmarks/fairness/run.sh                       # WORKERS=2, FLOOD=20
#   REDIS_URL=redis://127.0.0.1:6392/8 benchmarks/fairness/run.sh
#
# Needs PostgreSQL on 127.0.0.1:5432 (user root, trust) and a Redis (REDIS_URL, default database 8 on 6379).
set -euo pipefail
cd "$(dirname "$0")/../.."

WORKERS=${WORKERS:-2}
FLOOD=${FLOOD:-20}
TIMEOUT_S=${TIMEOUT_S:-300}
PORT=${PORT:-8078}
OUT=${OUT:-benchmarks/fairness/out}
DB=understudy_fairness
mkdir -p "$OUT"

export DATABASE_URL="postgresql://root@127.0.0.1:5432/$DB"
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/8}
export UNDERSTUDY_HOST_NAME=fairness UNDERSTUDY_RECONCILE_INTERVAL_S=60

psql -h 127.0.0.1 -U root -d postgres -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
psql -h 127.0.0.1 -U root -d postgres -qc "CREATE DATABASE $DB"
redis-cli -u "$REDIS_URL" flushdb >/dev/null
.venv/bin/alembic upgrade head >/dev/null 2>&1
A=$(.venv/bin/understudy keys create --name flood 2>/dev/null)
B=$(.venv/bin/understudy keys create --name cheap 2>/dev/null)

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
.venv/bin/understudy serve --port "$PORT" --log-level warning > "$OUT/server.log" 2>&1 &
PIDS+=($!)
for gpu in $(seq 0 $((WORKERS - 1))); do
  .venv/bin/understudy worker --gpu "$gpu" > "$OUT/worker$gpu.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 120); do
  live=$(curl -sf -H "X-API-Key: $B" "http://127.0.0.1:$PORT/v1/hosts" | python3 -c \
    'import json,sys; print(sum(h["alive"] for h in json.load(sys.stdin)["data"]))' 2>/dev/null || echo 0)
  [ "$live" -ge "$WORKERS" ] && break
  sleep 1
done

uptime > "$OUT/uptime.txt"
.venv/bin/python benchmarks/fairness/flood.py --url "http://127.0.0.1:$PORT" --flood-key "$A" --key "$B" \
  --flood "$FLOOD" --timeout-s "$TIMEOUT_S" --out "$OUT/result.json"
uptime >> "$OUT/uptime.txt"
