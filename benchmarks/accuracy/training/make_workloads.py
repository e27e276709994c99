"""Write the H200 training set: sixteen models the self-prediction set does not hold (CNNs, ViTs and hybrids), each
trained in fp32, amp-fp16, amp-bf16 and channels-last amp-fp16 (batch 64, SGD, 224 px): 64 workloads of today's
PyTorch, the training truth no public file gives (timm's only training file is PyTorch 1.12's).

The host's own time is the ground truth for these rows: `understudy evaluate --measure-only` records it on the H200
(benchmarks/accuracy/h200_training.sh), and `self_prediction.py --workloads` scores a GPU-free estimator's
prediction of the H200 against it. latency_ms is 0: the measurement comes from the log, not from this file.

Run: python benchmarks/accuracy/training/make_workloads.py > benchmarks/accuracy/training/workloads.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "self"))

# The self-prediction set's list, beside this one (its folder comes first on the path, before this one's).
from make_workloads import COLUMNS, H200, SETS

MODELS = {
    "cnn": ("resnet34", "resnet101", "regnetx_032", "efficientnet_b2", "mobilenetv2_100", "convnext_nano"),
    "vit": ("deit_small_patch16_224", "vit_tiny_patch16_224", "beit_base_patch16_224", "cait_xxs24_224",
            "eva02_tiny_patch14_224"),
    "hybrid": ("coatnet_0_rw_224", "maxvit_tiny_tf_224", "mobilevit_s", "efficientformer_l1", "pvt_v2_b1"),
}
BATCH = 64


def main() -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    for precision, memory_format in SETS:
        for family, models in MODELS.items():
            for model in models:
                out.writerow([H200, model, "train", precision, BATCH, 224, memory_format, "sgd", 0,
                              "measured on the host", f"benchmarks/accuracy/training ({family}; the host's own "
                              "measurement)"])


if __name__ == "__main__":
    main()
