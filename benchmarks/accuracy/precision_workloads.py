"""Write the development workloads the H200 measures in fp32 and amp-bf16, so that the constants pricing
those precisions are chosen on development models, and the self-prediction set (benchmarks/accuracy/self, other
models) reports them.

No development file holds an fp32 or bf16 timm row: fp32 was seen only in Lambda's ResNet-50, which cannot tell an
fp32 matmul's efficiency from anything else. The host's own time is the ground truth for these rows
(`fit_constants.py --host-rows LOG`): the models are the timm training file's at its resolutions (up to 288 px),
the ones the self-prediction set does not hold, taken in a fixed order (crc32 of the name); each at inference
(batch 256) and training (batch 64, SGD), as the self-prediction set is.

    python benchmarks/accuracy/precision_workloads.py ../shared/groundtruth/timm-train-amp-nchw-rtx3090-pt112.csv \
        > benchmarks/accuracy/precision-workloads.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "self"))

from evaluation.evaluate import read_rows
from make_workloads import COLUMNS, MODELS as SELF_MODELS, host_rows

PRECISIONS = ("fp32", "amp-bf16")
MAX_RESOLUTION = 288  # fp32 steps of larger images take seconds at these batches
COUNT = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("training_file", type=Path)
    parser.add_argument("--count", type=int, default=COUNT)
    args = parser.parse_args()
    resolution: dict[str, int] = {}
    for row in read_rows([args.training_file]):
        if row["model"] not in SELF_MODELS and int(row["resolution"]) <= MAX_RESOLUTION:
            resolution.setdefault(row["model"], int(row["resolution"]))
    models = sorted(resolution, key=lambda name: zlib.crc32(name.encode()))[:args.count]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    # Model by model, so a measurement cut short by its time budget loses whole models, not one precision.
    for model in models:
        for precision in PRECISIONS:
            out.writerows(host_rows(model, precision, resolution[model], "nchw",
                                    "benchmarks/accuracy/precision_workloads.py (the host's own measurement)"))


if __name__ == "__main__":
    main()
