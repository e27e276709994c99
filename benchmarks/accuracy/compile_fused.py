"""Choose the share of DRAM peak inductor's generated kernels reach (Efficiency.fused_memory) on timm's compiled
RTX 4090 file, leave-one-model-family-out, and score analytic and hostaware with it.

    python benchmarks/accuracy/compile_fused.py ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291-compile.csv \\
        --log benchmarks/accuracy/compile/h100-compile.jsonl --json benchmarks/accuracy/compile/fused.json

For each model family the share is chosen (on a grid of 0.005, by the least mean |log(predicted / measured)| of
analytic) on the other families' rows, and that family's rows are priced with it: analytic on every row, hostaware on
the rows whose compiled workload the log's host measured. The share chosen on every row is the one shipped. Every
other constant is analytic's, chosen on eager rows only. Counting the file's workloads takes a few minutes here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_ratio import measured
from understudy.catalog import TargetSpec, catalog
from understudy.workload import Workload, workload_from_row
from engine.count_lookup import counts_for
from engine.counts import WorkloadCounts
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.base import host_spec
from engine.estimators.hostaware import CONSTANTS, blend_factor
from engine.estimators.roofline import roofline_ms
from engine.measurement_log import MeasurementLog
from evaluation.evaluate import read_rows
from evaluation.rows import model_family


@dataclasses.dataclass(frozen=True)
class Row:
    workload: Workload
    counts: WorkloadCounts
    target: TargetSpec
    family: str
    measured_ms: float
    eager_ms: float  # analytic's price with the fused kernels at eager kernels' share (fused_memory 0)
    priced_ms: np.ndarray  # analytic's price at each share of GRID


GRID = tuple(round(0.4 + 0.005 * i, 3) for i in range(121))  # 0.400 to 1.000


def summary(errors: list[float]) -> dict[str, Any]:
    absolute = sorted(abs(e) for e in errors)
    return {"rows": len(errors), "mape_pct": round(100 * statistics.fmean(absolute), 1),
            "median_ape_pct": round(100 * statistics.median(absolute), 1),
            "p95_ape_pct": round(100 * absolute[max(0, int(0.95 * len(absolute)) - 1)], 1),
            "bias_pct": round(100 * statistics.fmean(errors), 1),
            "within_10_pct": round(100 * sum(e <= 0.10 for e in absolute) / len(absolute), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("compiled", type=Path, help="compiled ground truth of one GPU")
    parser.add_argument("--log", type=Path, action="append", required=True, help="host measurements (hostaware)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logs = [MeasurementLog(path) for path in args.log]
    rows: list[Row] = []
    for row in read_rows([args.compiled]):
        workload = workload_from_row(row)
        if not workload.compile:
            continue
        try:
            counts = counts_for(workload)
        except Exception as exc:  # noqa: BLE001 - a model the meta device cannot count is left out, and said
            print(f"left out {workload.label}: {exc}", file=sys.stderr)
            continue
        target = catalog().get(row["target"])
        priced = [sum(roofline_ms(counts, target, workload.precision,
                                  dataclasses.replace(EFFICIENCY, fused_memory=share)).values())
                  for share in (0.0, *GRID)]
        rows.append(Row(workload, counts, target, model_family(workload.model), float(row["latency_ms"]),
                        priced[0], np.array(priced[1:])))
    losses = np.array([np.abs(np.log(r.priced_ms / r.measured_ms)) for r in rows])  # rows x grid
    families = sorted({r.family for r in rows})
    total = losses.sum(axis=0)
    chosen = {}
    for family in families:
        mine = np.array([r.family == family for r in rows])
        chosen[family] = GRID[int(np.argmin((total - losses[mine].sum(axis=0)) / (len(rows) - mine.sum())))]
    on_all = GRID[int(np.argmin(losses.mean(axis=0)))]
    analytic_before = [r.eager_ms / r.measured_ms - 1 for r in rows]
    analytic_after = [r.priced_ms[GRID.index(chosen[r.family])] / r.measured_ms - 1 for r in rows]
    hostaware_before: list[float] = []
    hostaware_after: list[float] = []
    for r in rows:
        found = measured(logs, r.workload)
        if found is None:
            continue
        host, measurement = found
        for share, errors in ((0.0, hostaware_before), (chosen[r.family], hostaware_after)):
            factor, _ = blend_factor(r.counts, measurement, r.workload.precision, r.target, host_spec(host),
                                     CONSTANTS, efficiency=dataclasses.replace(EFFICIENCY, fused_memory=share))
            errors.append(measurement.device_ms * factor / r.measured_ms - 1)
    report = {
        "chosen_on_all": on_all, "families": len(families),
        "chosen_leaving_one_family_out": {"min": min(chosen.values()), "max": max(chosen.values())},
        "analytic": {"as_eager_kernels": summary(analytic_before), "leave_one_family_out": summary(analytic_after)},
        "hostaware": {"as_eager_kernels": summary(hostaware_before), "leave_one_family_out": summary(hostaware_after)},
    }
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
