#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl and .gt carried; about 420 s): the first prediction without cuDNN's algorithm
# search, where the first step of a convolution network spends its time (first_step_ops.py, each workload twice in a
# fresh driver compute cache of its own), the GPU tests, and the host's step times with the search off and on
# (evaluate --measure-only on one sample, the search off first; compare the two logs by key).
set -u
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
uptime; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
UNDERSTUDY_CUDNN_BENCHMARK=0 timeout 200 python3 -m benchmarks.cli.predict_wall first --out "$OUT/first" > "$OUT/first.txt" 2>&1; echo "first rc=$?"
for w in "convnext_tiny train 64" "efficientnet_b0 infer 64"; do
  d=$(mktemp -d); CUDA_CACHE_PATH=$d timeout 60 python3 -m benchmarks.cli.first_step_ops $w >> "$OUT/ops.txt" 2>&1
  CUDA_CACHE_PATH=$d timeout 60 python3 -m benchmarks.cli.first_step_ops $w >> "$OUT/ops.txt" 2>&1
done; echo "ops done"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu.py > "$OUT/gpu_tests.txt" 2>&1; echo "gpu tests rc=$?"
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10
E="python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45 --sample 14 --max-measured-ms 1000"
F=".gt/timm-infer-amp-nchw-rtx3090-pt240.csv .gt/timm-train-amp-nchw-rtx3090-pt112.csv"
UNDERSTUDY_CUDNN_BENCHMARK=0 $E $F --out /tmp/b --log "$OUT/ab-nosearch.jsonl" --budget-s 85 > "$OUT/ab-nosearch.txt" 2>&1
UNDERSTUDY_CUDNN_BENCHMARK=1 $E $F --out /tmp/a --log "$OUT/ab-search.jsonl" --budget-s 85 > "$OUT/ab-search.txt" 2>&1
wc -l "$OUT"/*.jsonl; tail -n 4 "$OUT"/gpu_tests.txt; tail -n 30 "$OUT/first.txt"; uptime
