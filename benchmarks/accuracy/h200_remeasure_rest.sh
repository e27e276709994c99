#!/usr/bin/env bash
# The rest of h200_remeasure.sh's work, one H200 call (nvidia-h200, .whl and .gt carried): only what changed. The
# training file's sampled attention models (unfused now, .gt/need-train.csv) and Lambda's fp32 workload the first
# call did not reach (.gt/need-lambda.csv). A sampled model without attention runs the very same step either way, and
# Lambda's AMP ResNet-50 has no TF32 kernel, so their earlier measurements stand (merge_remeasured.py).
set -u
source scripts/device_setup.sh
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 PYTHONUNBUFFERED=1
E="python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 60"
$E .gt/need-lambda.csv --out /tmp/l --log "$OUT/lambda.jsonl" --budget-s 60 > "$OUT/lambda.txt" 2>&1
$E .gt/need-train.csv --out /tmp/t --log "$OUT/train.jsonl" --max-measured-ms 100000 --budget-s 420 > "$OUT/train.txt" 2>&1
tail -n 2 "$OUT"/*.txt; wc -l "$OUT"/*.jsonl
