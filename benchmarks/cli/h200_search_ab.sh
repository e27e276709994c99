#!/usr/bin/env bash
# One GPU-host call (nvidia-h200, .whl carried, ../shared/groundtruth copied to .gt): the host's steps of one sample
# of timm's files measured without cuDNN's algorithm search, then with it, in the same call, so that hostaware can be
# replayed on each log and the two scored on the same rows (search_ab.py compares the steps, by key):
#   bash benchmarks/cli/h200_search_ab.sh
# OFF_BUDGET and ON_BUDGET (seconds) keep the call under the device tool's 600 s; the search costs more per workload.
# Each log is replayed with the same sample (the same files, --seed, --sample and --max-measured-ms):
#   .venv/bin/python -m cli evaluate FILES --seed 0 --sample 20 --max-measured-ms 1000 --estimators hostaware \
#       --replay --measured-only --log ab-nosearch.jsonl --out OFF        (and ab-search.jsonl, --out ON)
#   .venv/bin/python -m benchmarks.cli.search_ab ab-nosearch.jsonl ab-search.jsonl --rows OFF/rows.csv ON/rows.csv
set -u
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1 UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
E="python3 -m cli evaluate --seed 0 --measure-only --estimators hostaware --workload-timeout-s 45 --sample 20"
F=".gt/timm-infer-amp-nchw-rtx3090-pt240.csv .gt/timm-infer-amp-nchw-rtx4090-pt291.csv
   .gt/timm-train-amp-nchw-rtx3090-pt112.csv"
UNDERSTUDY_CUDNN_BENCHMARK=0 $E $F --max-measured-ms 1000 --out /tmp/off --log "$OUT/ab-nosearch.jsonl" \
  --budget-s "${OFF_BUDGET:-150}" > "$OUT/ab-nosearch.txt" 2>&1
echo "search off rc=$?"
UNDERSTUDY_CUDNN_BENCHMARK=1 $E $F --max-measured-ms 1000 --out /tmp/on --log "$OUT/ab-search.jsonl" \
  --budget-s "${ON_BUDGET:-330}" > "$OUT/ab-search.txt" 2>&1
echo "search on rc=$?"
wc -l "$OUT"/*.jsonl
python3 -m benchmarks.cli.search_ab "$OUT/ab-nosearch.jsonl" "$OUT/ab-search.jsonl" | tail -n 3
