#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl and .gt carried; about 9 minutes; COUNTS_ONLY=1: step 1 alone):
# 1. every ground-truth and self-prediction workload counted on 15 processes with the committed code (count_cache.py
#    --pack). Rows of torch 1.x files are counted as that PyTorch ran them (Workload.torch_major); the host's own
#    rows of the same workloads (its PyTorch 2 step: fit_constants.py --host-rows) need the PyTorch 2 counts too, so
#    the training and Lambda files are counted again with their software column set to the host's;
# 2. the timm training file's sample in channels-last on the host, continuing h200-train-nhwc.jsonl (same seed, so
#    the workloads it holds are skipped);
# 3. a kernel profile of training steps in both memory formats beside their counts (kernel_profile.py).
set -u
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
host_software() { sed '2,$ s/,torch 1\.12 cu113,/,torch 2.11 host,/; 2,$ s/,NGC PyTorch [^,]*,/,torch 2.11 host,/' "$1"; }
host_software .gt/timm-train-amp-nchw-rtx3090-pt112.csv > /tmp/train-pt2.csv
host_software .gt/lambda-resnet50-train.csv > /tmp/lambda-pt2.csv
sed '2,$ s/,nchw,/,nhwc,/' /tmp/train-pt2.csv > /tmp/train-nhwc.csv
python3 benchmarks/accuracy/count_cache.py .gt/*.csv benchmarks/accuracy/self/workloads.csv \
    benchmarks/accuracy/training/workloads.csv benchmarks/accuracy/precision-workloads.csv \
    benchmarks/accuracy/compile/eager-twins.csv /tmp/train-pt2.csv \
    /tmp/lambda-pt2.csv /tmp/train-nhwc.csv --out /tmp/counts.pkl --processes 15 --pack "$OUT/counts.xz" 2>&1 \
    | tail -n 3
if [ -n "${COUNTS_ONLY:-}" ]; then ls -la "$OUT"; exit 0; fi  # step 1 alone (about 4 minutes)
cp benchmarks/accuracy/h200-train-nhwc.jsonl "$OUT/train-nhwc.jsonl"
UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 timeout 200 python3 -m cli evaluate --seed 0 --measure-only \
    --estimators hostaware --workload-timeout-s 45 /tmp/train-nhwc.csv --out /tmp/t --log "$OUT/train-nhwc.jsonl" \
    --sample 98 --max-measured-ms 1000 --budget-s "${NHWC_BUDGET:-140}" > "$OUT/train-nhwc.txt" 2>&1
tail -n 3 "$OUT/train-nhwc.txt"; wc -l "$OUT/train-nhwc.jsonl"
P=()
for m in resnet50 resnext50_32x4d convnext_tiny efficientnet_b0 edgenext_small vit_small_patch16_224; do
  for f in nchw nhwc; do P+=("$m:train:64:amp-fp16:$f"); done
  P+=("$m:train:64:fp32:nchw" "$m:infer:256:amp-fp16:nchw")
done
timeout "${PROFILE_BUDGET:-170}" python3 benchmarks/accuracy/kernel_profile.py "${P[@]}" --out "$OUT/kernel-profile.jsonl"
ls -la "$OUT"
