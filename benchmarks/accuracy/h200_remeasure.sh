#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl and .gt carried; about 8 minutes), after two changes that alter what the host
# measures or how it is keyed: TF32 kernels classed as tensor-core time (engine.timing.kernel_class), and workloads
# of PyTorch 1.x rows built with timm's attention unfused (Workload.torch_major). Measures Lambda's ResNet-50
# workloads and the timm training file's sample again, and counts both files with this code.
set -u
source scripts/device_setup.sh
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 PYTHONUNBUFFERED=1
E="python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45"
python3 benchmarks/accuracy/count_cache.py .gt/timm-train-amp-nchw-rtx3090-pt112.csv .gt/lambda-resnet50-train.csv \
    --out /tmp/c.pkl --processes 15 --pack "$OUT/counts-pt1.xz" 2>&1 | tail -n 1
$E .gt/lambda-resnet50-train.csv --out /tmp/l --log "$OUT/lambda.jsonl" --budget-s 100 > "$OUT/lambda.txt" 2>&1
$E .gt/timm-train-amp-nchw-rtx3090-pt112.csv --out /tmp/t --log "$OUT/train.jsonl" --sample 98 \
    --max-measured-ms 1000 --budget-s 330 > "$OUT/train.txt" 2>&1
tail -n 2 "$OUT"/*.txt; wc -l "$OUT"/*.jsonl
