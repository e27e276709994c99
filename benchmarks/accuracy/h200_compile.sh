#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl carried; about 9 minutes): compiled inference (torch.compile, inductor) of the
# workloads in benchmarks/accuracy/compile/workloads.csv, whose eager twins h200-measurements.jsonl already holds.
# 1. compiled 12 at a time into inductor's on-disk caches (compile_prewarm.py), for PREWARM_BUDGET seconds;
# 2. those that compiled measured one at a time, unrestricted and profiled (each compile now mostly a cache hit),
#    into $OUT/h200-compile.jsonl, for MEASURE_BUDGET seconds.
set -u
source scripts/device_setup.sh
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR="$PWD/.inductor-cache"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
python3 -c "import torch, timm, triton; print(torch.__version__, timm.__version__, triton.__version__)"
TORCHINDUCTOR_COMPILE_THREADS=1 python3 benchmarks/accuracy/compile_prewarm.py \
    benchmarks/accuracy/compile/workloads.csv --processes 12 --budget-s "${PREWARM_BUDGET:-210}" \
    --out "$OUT/h200-prewarm.jsonl" --warm /tmp/warm.csv > "$OUT/prewarm.txt" 2>&1
tail -n 2 "$OUT/prewarm.txt"
# Nothing compiled in time (or the prewarm broke): measure the workloads as they come, each compiling cold.
[ "$(wc -l < /tmp/warm.csv 2>/dev/null || echo 0)" -gt 1 ] || cp benchmarks/accuracy/compile/workloads.csv /tmp/warm.csv
timeout $(( ${MEASURE_BUDGET:-270} + 45 )) python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware \
    /tmp/warm.csv --out /tmp/c --log "$OUT/h200-compile.jsonl" --budget-s "${MEASURE_BUDGET:-270}" \
    > "$OUT/measure.txt" 2>&1
tail -n 2 "$OUT/measure.txt"
wc -l "$OUT"/*.jsonl
