#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl carried; about 5 minutes): the training set's workloads the first call
# (h200_training.sh) left unmeasured, continuing its log; the GPU tests; and predictions with their error bands and
# memory verdicts, as a user sees them, on the host's GPU (hostaware) and counted (analytic).
set -u
source scripts/device_setup.sh
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 PYTHONUNBUFFERED=1 UNDERSTUDY_CACHE_DIR=/tmp/us-cache
cp benchmarks/accuracy/training/h200-training.jsonl "$OUT/h200-training.jsonl"
python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45 \
    benchmarks/accuracy/training/workloads.csv --out /tmp/t --log "$OUT/h200-training.jsonl" \
    --budget-s "${TRAINING_BUDGET:-150}" > "$OUT/training.txt" 2>&1
tail -n 1 "$OUT/training.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu.py > "$OUT/gpu_tests.txt" 2>&1
tail -n 3 "$OUT/gpu_tests.txt"
export DATABASE_URL=sqlite:////tmp/us-cache/predict.sqlite COLUMNS=160
T=rtx3090,a10,rtx-pro-6000-blackwell-max-q,t4,rtx4090@300w
for E in hostaware analytic; do
  python3 -m cli predict resnet50 -t "$T" --mode train -b 64 --precision amp-fp16 --estimator "$E" 2>&1 \
      | tee -a "$OUT/predict.txt"
done
python3 -m cli predict vit_large_patch16_224 -t rtx3090,rtx4090 --mode train -b 96 --precision amp-fp16 \
    --estimator hostaware 2>&1 | tee -a "$OUT/predict.txt"
python3 -m cli predict resnet50 -t "$T" --mode train -b 64 --precision amp-fp16 --estimator hostaware --json \
    > "$OUT/predict.json" 2>&1
wc -l "$OUT"/*.jsonl
