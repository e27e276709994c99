#!/usr/bin/env bash
# The engine on the H200 test host: `understudy predict` (spec estimator) for resnet50 and vit_small_patch16_224,
# train, amp-fp16, batch 64, 224 px, on RTX 3060/3090/4090 (and the H200 itself, unrestricted), once with green
# contexts and once with MPS. benchmarks/engine_demo_report.py turns the JSON into the committed table.
# Run from the repo root after `source scripts/device_setup.sh`; writes into $1 (default $OUT).
set -u
out=${1:-$OUT}
mkdir -p "$out"
export DATABASE_URL="sqlite:///$out/demo.sqlite"
for model in resnet50 vit_small_patch16_224; do
  for mechanism in green-context mps; do
    python3 -m cli.main predict "$model" --targets rtx3060,rtx3090,rtx4090,h200 --mode train \
      --precision amp-fp16 --batch-size 64 --resolution 224 --estimator spec --sm-mechanism "$mechanism" \
      --json > "$out/$model-$mechanism.json" 2> "$out/$model-$mechanism.log" || tail -5 "$out/$model-$mechanism.log"
  done
  python3 -m cli.main predict "$model" --targets rtx3060,rtx3090,rtx4090 --mode train --precision amp-fp16 \
    --batch-size 64 --resolution 224 --estimator spec --sm-mechanism green-context 2>&1 | tail -12
done
python3 benchmarks/engine_demo_report.py "$out" | tee "$out/engine-demo.md"
