"""A GPU no development file has, as a target: the estimators and their error bands scored against that GPU's own
measurements of the self-prediction workloads (benchmarks/accuracy/self/workloads.csv, every precision and format).

The truth is the lent GPU's step as the host measures one (`understudy evaluate --measure-only` on it: the
graph-timed step's device time); hostaware predicts it from the H200 host's measurement of the same workload, and
analytic from the counts. Nothing here is fitted: the GPU was in no fit, of the constants or of the band.

    python benchmarks/accuracy/held_out_gpu.py benchmarks/accuracy/self/workloads.csv \\
        --target "NVIDIA H100 SXM5 80 GB" --truth benchmarks/accuracy/self/h100-self.jsonl \\
        --host-log benchmarks/accuracy/self/h200-self.jsonl --json benchmarks/accuracy/self/h100-held-out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_ratio import measured
from understudy.bands import DEFAULT_COVERAGE
from understudy.catalog import catalog
from understudy.results import HostInfo
from understudy.workload import workload_from_row
from engine.engine import prediction_band
from engine.estimators import get_estimator
from engine.measurement_log import MeasurementLog
from evaluation.evaluate import read_rows

ESTIMATORS = ("hostaware", "analytic")


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [row["predicted_ms"] / row["measured_ms"] - 1 for row in rows]
    return {"rows": len(rows), "mape_pct": round(100 * statistics.fmean(abs(e) for e in errors), 1),
            "bias_pct": round(100 * statistics.fmean(errors), 1),
            "coverage_pct": round(100 * statistics.fmean(row["low_ms"] <= row["measured_ms"] <= row["high_ms"]
                                                         for row in rows), 1),
            "median_half_width_pct": round(100 * statistics.median((row["high_ms"] - row["low_ms"]) / 2
                                                                   / row["predicted_ms"] for row in rows), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", type=Path, help="the workloads both logs measured (self/workloads.csv)")
    parser.add_argument("--target", required=True, help="the lent GPU's catalog name")
    parser.add_argument("--truth", type=Path, required=True, help="the lent GPU's measurement log")
    parser.add_argument("--host-log", type=Path, required=True, help="the H200 host's log of the same workloads")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    target = catalog().get(args.target)
    truth, host_log = [MeasurementLog(args.truth)], [MeasurementLog(args.host_log)]
    scored: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for workload in sorted({workload_from_row(row) for row in read_rows([args.workloads])},
                           key=lambda w: (w.label, w.memory_format)):
        if (lent := measured(truth, workload)) is None:
            continue
        on_target = lent[1]
        on_host = measured(host_log, workload)
        for name in ESTIMATORS:
            if name == "hostaware" and on_host is None:
                continue
            host_info, measurement = on_host or (HostInfo(), None)
            estimate = get_estimator(name).estimate(workload, target, host_info, measurement)
            band = prediction_band(name, workload, target, estimate) if estimate.latency_ms else None
            if band is None or not estimate.latency_ms:
                continue
            low, high = band.interval(estimate.latency_ms, DEFAULT_COVERAGE)
            scored[name].append({"workload": workload.label, "set": f"{workload.mode} {workload.precision} "
                                 f"{workload.memory_format}", "measured_ms": round(on_target.device_ms, 4),
                                 "predicted_ms": round(estimate.latency_ms, 4), "low_ms": round(low, 4),
                                 "high_ms": round(high, 4)})
    report: dict[str, Any] = {"target": target.name, "truth": str(args.truth), "host_log": str(args.host_log)}
    print(f"| {target.name}, measured on itself | rows | MAPE | bias | 80 % band: coverage | median half-width |")
    print("|---|---|---|---|---|---|")
    for name in ESTIMATORS:
        rows = scored[name]
        by_set = defaultdict(list)
        for row in rows:
            by_set[row["set"]].append(row)
        report[name] = {"all": summary(rows), "by_set": {key: summary(v) for key, v in sorted(by_set.items())},
                        "rows": rows}
        for label, part in [("all", report[name]["all"]), *report[name]["by_set"].items()]:
            print(f"| {name}, {label} | {part['rows']} | {part['mape_pct']} % | {part['bias_pct']:+} % | "
                  f"{part['coverage_pct']} % | {part['median_half_width_pct']} % |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
