"""Where hostaware's compiled predictions miss: its two estimates (the host-scaled one and the target's roofline)
scored apart on the workloads one host measured both eager and compiled, and the host's own steps against the
roofline, by kernel class.

    python benchmarks/accuracy/compile_parts.py ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291.csv \\
        ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291-compile.csv \\
        --log benchmarks/accuracy/compile/h100-eager-twins.jsonl --log benchmarks/accuracy/compile/h100-compile.jsonl

Every workload measured in a log (eager or compiled) whose twin (the same model, batch and resolution the other
way) is measured too and has a row in the files is scored; the counts come from the meta device, so this takes a
minute or two without a GPU. Nothing is fitted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_ratio import measured
from understudy.catalog import resolve_target
from understudy.workload import Workload, workload_from_row
from engine.count_lookup import counts_for
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.base import host_spec
from engine.estimators.hostaware import CLASSES, CONSTANTS, blend_factor
from engine.estimators.roofline import roofline_ms
from engine.measurement_log import MeasurementLog
from evaluation.evaluate import read_rows


def twin(workload: Workload) -> Workload:
    return workload.model_copy(update={"compile": not workload.compile})


def summary(errors: list[float]) -> str:
    return (f"bias {100 * statistics.fmean(errors):+.1f} %, MAPE {100 * statistics.fmean(abs(e) for e in errors):.1f} %"
            f", too fast on {sum(e < 0 for e in errors)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="ground-truth CSVs of one target, eager and compiled")
    parser.add_argument("--log", action="append", type=Path, required=True, help="the host's measurement logs")
    args = parser.parse_args()
    truth: dict[Workload, tuple[str, float]] = {}
    for row in read_rows(args.files):
        truth[workload_from_row(row)] = (row["target"], float(row["latency_ms"]))
    logs = [MeasurementLog(path) for path in args.log]
    found = {w: m for w in truth if (m := measured(logs, w)) is not None}
    pairs = sorted((w for w in found if twin(w) in found), key=lambda w: (w.compile, w.model))
    print(f"{len(pairs) // 2} workloads measured both ways, with rows both ways")
    for compiled in (False, True):
        scaled, roofline, host_total = [], [], []
        host_class: dict[str, list[float]] = {name: [] for name in CLASSES}
        for workload in (w for w in pairs if w.compile == compiled):
            host, measurement = found[workload]
            target_name, latency_ms = truth[workload]
            counts, training = counts_for(workload), workload.mode == "train"
            _, parts = blend_factor(counts, measurement, workload.precision, resolve_target(target_name),
                                    host_spec(host), CONSTANTS, training=training)
            scaled.append(parts["host_scaled_ms"] / latency_ms - 1)
            roofline.append(parts["roofline_ms"] / latency_ms - 1)
            on_host = roofline_ms(counts, host_spec(host), workload.precision, EFFICIENCY, CONSTANTS.reuse,
                                  training)
            kernel_ms = measurement.kernel_ms or {}
            host_total.append(sum(kernel_ms.get(name, 0.0) for name in CLASSES) / sum(on_host.values()))
            for name in CLASSES:
                if on_host[name] > 0 and kernel_ms.get(name, 0.0) > 0:
                    host_class[name].append(kernel_ms[name] / on_host[name])
        label = "compiled" if compiled else "eager"
        print(f"\n{label}, {len(scaled)} workloads")
        print(f"  host-scaled estimate against the target's rows: {summary(scaled)}")
        print(f"  the target's roofline (hostaware's) against them: {summary(roofline)}")
        print(f"  the host's profiled step / its roofline, median: {statistics.median(host_total):.2f}; by class: "
              + ", ".join(f"{name} {statistics.median(v):.2f} ({len(v)})" for name, v in host_class.items() if v))


if __name__ == "__main__":
    main()
