#!/usr/bin/env bash
# The H200 measurements the accuracy report rests on, one call on a two-GPU host (nvidia-h200-x2), carrying .whl and .gt:
#   GPU 0: channels-last inference rows of timm's files (hostaware needs the host's own nhwc measurement);
#   GPU 1: Lambda's ResNet-50 training workloads (fp32 and AMP), the self-prediction set
#          (benchmarks/accuracy/self/workloads.csv) and the GPU tests.
# Budgets keep the call inside the device tool's 10-minute limit; what is logged comes back under $OUT.
# PRIOR=DIR continues an earlier call: its logs are copied under $OUT first, and what they hold is not measured again.
set -u
source scripts/device_setup.sh
if [ -n "${PRIOR:-}" ]; then cp "$PRIOR"/*.jsonl "$OUT"/; fi
export UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
python3 -c "import torch, timm; print(torch.__version__, timm.__version__, torch.backends.cudnn.version())"
E="python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45"
NHWC_BUDGET=${NHWC_BUDGET:-500} SELF_BUDGET=${SELF_BUDGET:-340}
( $E .gt/timm-infer-amp-nhwc-*.csv --out /tmp/n0 --log "$OUT/nhwc.jsonl" --sample 150 --max-measured-ms 1000 \
    --budget-s "$NHWC_BUDGET" --gpu 0 > "$OUT/nhwc.txt" 2>&1 ) &
( $E .gt/lambda-resnet50-train.csv --out /tmp/l1 --log "$OUT/self.jsonl" --budget-s 90 --gpu 1 > "$OUT/lambda.txt" 2>&1
  $E benchmarks/accuracy/self/workloads.csv --out /tmp/s1 --log "$OUT/self.jsonl" --budget-s "$SELF_BUDGET" --gpu 1 \
    > "$OUT/self.txt" 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout 90 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu.py \
    > "$OUT/gpu_tests.txt" 2>&1 ) &
wait
tail -n 3 "$OUT"/*.txt; wc -l "$OUT"/*.jsonl
