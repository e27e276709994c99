"""Write the H200 self-prediction workload list: the same models in fp32, amp-fp16, amp-bf16 and
channels-last (amp-fp16, nhwc), each at inference (batch 256) and training (batch 64, SGD), 224 px.

The host's own time is the ground truth for these rows: `understudy evaluate --measure-only` records it on the H200,
and `self_prediction.py` scores a GPU-free estimator's prediction of the H200 against it. The rows' latency_ms is
left at 0 because the measurement comes from the log, not from this file.

Run: python benchmarks/accuracy/self/make_workloads.py > benchmarks/accuracy/self/workloads.csv
"""

from __future__ import annotations

import csv
import sys

H200 = "NVIDIA H200 SXM 141 GB"
MODELS = (
    "resnet18", "resnet50", "resnext50_32x4d", "convnext_tiny", "convnextv2_tiny", "vit_small_patch16_224",
    "vit_base_patch16_224", "swin_tiny_patch4_window7_224", "mixer_b16_224", "efficientnet_b0",
    "tf_efficientnetv2_s", "mobilenetv3_large_100", "regnety_016", "densenet121", "vgg16", "inception_v3",
    "poolformer_s12", "edgenext_small",
)
# (precision, memory format) of each set.
SETS = (("fp32", "nchw"), ("amp-fp16", "nchw"), ("amp-bf16", "nchw"), ("amp-fp16", "nhwc"))
BATCH = {"infer": 256, "train": 64}


COLUMNS = ("target", "model", "mode", "precision", "batch_size", "resolution", "memory_format", "optimizer",
           "latency_ms", "software", "source")


def host_rows(model: str, precision: str, resolution: int, memory_format: str, source: str) -> list[list[object]]:
    """One model's rows of a host workload list, at inference and training (BATCH): the H200 as the target, latency 0
    (the measurement comes from the log)."""
    return [[H200, model, mode, precision, batch, resolution, memory_format, "sgd" if mode == "train" else "none", 0,
             "measured on the host", source] for mode, batch in BATCH.items()]


def main() -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    for precision, memory_format in SETS:
        for model in MODELS:
            out.writerows(host_rows(model, precision, 224, memory_format,
                                    "benchmarks/accuracy/self (the host's own measurement)"))


if __name__ == "__main__":
    main()
