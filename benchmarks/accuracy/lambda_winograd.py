"""A what-if on Lambda's rows (benchmarks/accuracy/README.md, "A user-defined target at a power limit of its own"):
analytic's ratio errors against the RTX 3090 if the fp32 3 x 3 stride-1 convolutions ran as Winograd kernels, doing
`factor` times fewer multiplies, on the GPUs whose TF32 rate is no more than their FP32 rate (GeForce Ampere and Ada,
and the chips before Ampere).

It counts each workload here (the counts cache does not say a convolution's filter) with engine.counting's kinds, the
convolutions in question told apart by a wrapper around its kind rule, and prices them with the shipped constants;
nothing is refitted. Per row: the ratio error, the share of the step analytic prices on tensor cores, and per GPU the
fp32 / AMP time per image, predicted and measured.

    python benchmarks/accuracy/lambda_winograd.py ../shared/groundtruth/lambda-resnet50-train.csv --factor 1 1.5 2.25
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import engine.counting as counting
from engine.counts import WorkloadCounts
from engine.counting import count_workload
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.roofline import roofline_ms
from understudy.catalog import TargetSpec, catalog
from understudy.workload import Workload

REFERENCE = "rtx-3090"
_kind_of = counting._kind


def _kind_or_winograd(func: Any, args: tuple[Any, ...], inputs: list[Any], channels_first: bool) -> str:
    kind = _kind_of(func, args, inputs, channels_first)
    if kind != "tensor" or func not in counting._CONV:
        return kind
    backward = func is counting.aten.convolution_backward.default
    source, weight = (args[1], args[2]) if backward else (args[0], args[1])
    stride, groups = (args[4], args[9]) if backward else (args[3], args[8])
    square3 = tuple(weight.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and groups == 1
    return "winograd" if square3 and source.dtype == counting.torch.float32 else kind


def counted(workload: Workload) -> WorkloadCounts:
    counting._kind = _kind_or_winograd  # type: ignore[assignment]
    try:
        return count_workload(workload)
    finally:
        counting._kind = _kind_of


def step_ms(counts: WorkloadCounts, gpu: TargetSpec, precision: str, factor: float) -> tuple[float, float]:
    """The step's time and its tensor share, the Winograd convolutions' FLOPs divided by `factor` where TF32 buys
    nothing over the FP32 lanes."""
    cheaper = factor if (gpu.tf32_tensor_tflops or 0) <= (gpu.fp32_tflops or 0) * 1.01 else 1.0
    ops = [("tensor", flops / cheaper, moved) if kind == "winograd" else (kind, flops, moved)
           for kind, flops, moved in counts.ops]
    parts = roofline_ms(dataclasses.replace(counts, ops=ops), gpu, precision, EFFICIENCY, training=True)
    total = sum(parts.values())
    return total, parts["tensor"] / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lambda_csv", type=Path)
    parser.add_argument("--factor", type=float, nargs="+", default=[1.0])
    args = parser.parse_args()
    rows = {}  # (target id, precision) -> (counts, batch, measured ms per image)
    for row in csv.DictReader(args.lambda_csv.open()):
        workload = Workload(model=row["model"], mode=row["mode"], batch_size=int(row["batch_size"]),
                            resolution=int(row["resolution"]), precision=row["precision"], optimizer=row["optimizer"])
        rows[(catalog().get(row["target"]).id, row["precision"])] = (
            counted(workload), workload.batch_size, float(row["latency_ms"]) / workload.batch_size)
    reference_counts = rows[(REFERENCE, "fp32")][0]
    tensor_flops = [(kind, flops) for kind, flops, _ in reference_counts.ops if kind in ("tensor", "winograd")]
    share = sum(f for kind, f in tensor_flops if kind == "winograd") / sum(f for _, f in tensor_flops)
    print(f"3 x 3 stride-1 convolutions: {share:.2f} of the {REFERENCE} fp32 step's tensor FLOPs")
    for factor in args.factor:
        priced = {key: step_ms(counts, catalog().get(key[0]), key[1], factor) for key, (counts, _, _) in rows.items()}
        per_image = {key: priced[key][0] / batch for key, (_, batch, _) in rows.items()}
        print(f"factor {factor:g}")
        errors = []
        for (target, precision), (_, _, measured) in sorted(rows.items()):
            reference = (REFERENCE, precision)
            error = (per_image[(target, precision)] / per_image[reference]) / (measured / rows[reference][2]) - 1
            if target != REFERENCE:
                errors.append(abs(error))
            print(f"  {target:26s} {precision:9s} ratio error {error * 100:+6.1f} %  "
                  f"tensor share {priced[(target, precision)][1]:.2f}")
        for target in sorted({target for target, _ in rows}):
            predicted = per_image[(target, "fp32")] / per_image[(target, "amp-fp16")]
            measured = rows[(target, "fp32")][2] / rows[(target, "amp-fp16")][2]
            print(f"  {target:26s} fp32 / AMP per image: predicted {predicted:.2f}, measured {measured:.2f}")
        print(f"  mean {np.mean(errors) * 100:.1f} %, worst {max(errors) * 100:.1f} % over {len(errors)} rows")


if __name__ == "__main__":
    main()
