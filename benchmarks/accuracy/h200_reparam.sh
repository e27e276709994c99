#!/usr/bin/env bash
# One H200 call (nvidia-h200, .whl and .gt carried; about 5 minutes): the reparameterized inference of the RTX 4090's
# PyTorch 2.9.1 file (Workload.reparam; /tmp/need-reparam.csv: its rows of models that reparameterize_model changes).
# 1. the GPU tests, the engine's build path having changed (a reparam model is folded where it is built);
# 2. those workloads counted (count_cache.py; the rest of counts.xz is unchanged);
# 3. those workloads measured and profiled on the host, as every hostaware row is (evaluate --measure-only). The
#    committed log keeps the 14 whose plain workload it already held, so hostaware's sample stays the same rows (all 44
#    would give folding models three times their share of the file).
set -u
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
python3 - <<'EOF'
import csv
from understudy.workload import reparameterizable_models
rows = list(csv.DictReader(open(".gt/timm-infer-amp-nchw-rtx4090-pt291.csv")))
out = csv.DictWriter(open("/tmp/need-reparam.csv", "w"), fieldnames=list(rows[0]))
out.writeheader()
out.writerows(row for row in rows if row["model"] in reparameterizable_models())
EOF
python3 -m pytest -p no:cacheprovider -q tests/engine/test_gpu.py 2>&1 | tail -n 3
python3 benchmarks/accuracy/count_cache.py /tmp/need-reparam.csv --out /tmp/reparam-counts.pkl --processes 15 \
    --pack "$OUT/reparam-counts.xz" 2>&1 | tail -n 3
cp benchmarks/accuracy/h200-measurements.jsonl "$OUT/measurements.jsonl"  # appended to: same host, same fingerprint
UNDERSTUDY_TIMED_WINDOWS=5 UNDERSTUDY_WINDOW_MS=10 python3 -m cli evaluate --seed 0 --measure-only \
    --estimators hostaware --workload-timeout-s 60 /tmp/need-reparam.csv --out /tmp/r --log "$OUT/measurements.jsonl" \
    --budget-s "${REPARAM_BUDGET:-330}" > "$OUT/reparam.txt" 2>&1
tail -n 3 "$OUT/reparam.txt"; wc -l "$OUT/measurements.jsonl"
