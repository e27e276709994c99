"""Which part of the fusion rule (engine.fusion) carries `analytic` on compiled rows: the rule's parts turned off one
at a time, scored on a sample of a compiled ground-truth file (the roofline's time alone: no memory verdict).

    python benchmarks/accuracy/compile_ablation.py \\
        ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291-compile.csv --sample 120 --seed 0
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import engine.fusion as fusion
from understudy.catalog import catalog
from understudy.workload import workload_from_row
from engine.counting import count_workload
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.roofline import roofline_ms
from evaluation.evaluate import plan_sample, read_rows

# name -> (count the workload compiled, fusible kinds, layout decision: None for inductor's, else always/never)
VARIANTS: dict[str, tuple[bool, frozenset[str], bool | None]] = {
    "eager counts": (False, fusion.FUSIBLE_KINDS, None),
    "channels-last convolutions, no fusion": (True, frozenset(), None),
    "fusion, NCHW conversions kept": (True, fusion.FUSIBLE_KINDS, False),
    "fusion, every graph channels-last": (True, fusion.FUSIBLE_KINDS, True),
    "the rule (fusion, inductor's layout decision)": (True, fusion.FUSIBLE_KINDS, None),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--sample", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    plans = plan_sample(read_rows([args.file]), args.sample, args.seed)
    decide = fusion.layout_optimized
    for name, (compiled, kinds, layout) in VARIANTS.items():
        fusion.FUSIBLE_KINDS = kinds
        fusion.layout_optimized = decide if layout is None else (lambda *_, always=layout: always)  # type: ignore[misc]
        errors = []
        for plan in plans:
            row = plan.rows[0]
            workload = workload_from_row(row).model_copy(update={"compile": compiled})
            target = catalog().get(row["target"])
            predicted = sum(roofline_ms(count_workload(workload), target, workload.precision, EFFICIENCY,
                                        training=workload.mode == "train").values())
            errors.append(predicted / float(row["latency_ms"]) - 1)
        print(f"| {name} | {100 * statistics.mean(map(abs, errors)):.1f} % | {100 * statistics.mean(errors):+.1f} % |",
              flush=True)


if __name__ == "__main__":
    main()
