#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl carried; about 9 minutes):
# 1. the training set (benchmarks/accuracy/training/workloads.csv: 64 workloads of today's PyTorch) measured on the
#    host, unrestricted and profiled, into $OUT/h200-training.jsonl;
# 2. small FL training steps timed as an FL client runs them (benchmarks/fl/small_steps.py).
set -u
source scripts/device_setup.sh
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
python3 -c "import torch, timm; print(torch.__version__, timm.__version__, torch.backends.cudnn.version())"
python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45 \
    benchmarks/accuracy/training/workloads.csv --out /tmp/t --log "$OUT/h200-training.jsonl" \
    --budget-s "${TRAINING_BUDGET:-450}" > "$OUT/training.txt" 2>&1
tail -n 2 "$OUT/training.txt"
timeout "${FL_BUDGET:-80}" python3 benchmarks/fl/small_steps.py --out "$OUT/small-steps.jsonl" > "$OUT/small-steps.txt" 2>&1
wc -l "$OUT"/*.jsonl
