"""How well the estimators predict what torch.compile gains: each workload of timm's compiled RTX 4090 file paired
with the same model, batch and resolution in its eager file, the predicted compiled/eager ratio against the measured.

    python benchmarks/accuracy/compile_ratio.py \\
        ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291-compile.csv \\
        ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291.csv \\
        --log benchmarks/accuracy/h200-measurements.jsonl --log benchmarks/accuracy/compile/h200-compile.jsonl \\
        --json benchmarks/accuracy/compile/ratio.json

`analytic` is scored on every pair (or `--sample N` of them), `hostaware` on the pairs whose two workloads the
H200's logs measured (one host per log; each workload's measurement is looked up in every log). A pair counts once
per workload, not per row: the files hold one row per workload.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.catalog import catalog
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload, workload_from_row
from engine.estimators.analytic import AnalyticEstimator
from engine.estimators.hostaware import HostAwareEstimator
from engine.measurement_log import MeasurementLog
from evaluation.evaluate import read_rows

TARGET = "GeForce RTX 4090"


def pairs(compiled_file: Path, eager_file: Path) -> list[tuple[dict[str, str], dict[str, str]]]:
    """(compiled row, eager row) of each model, batch and resolution both files hold."""
    def key(row: dict[str, str]) -> tuple[str, str, str]:
        return row["model"], row["batch_size"], row["resolution"]

    eager = {key(row): row for row in read_rows([eager_file])}
    return [(row, eager[key(row)]) for row in read_rows([compiled_file]) if key(row) in eager]


def measured(logs: list[MeasurementLog], workload: Workload) -> tuple[HostInfo, Measurement] | None:
    for log in logs:
        host = log.only_host()
        found = log.get(host, workload, HostSetting(profile=True))
        if found is not None and found.status == "done":
            return host, found
    return None


def summary(errors: list[float]) -> dict[str, Any]:
    """Errors of the predicted ratio over the measured (predicted/measured - 1), in per cent."""
    if not errors:
        return {"pairs": 0}
    absolute = [abs(error) for error in errors]
    return {"pairs": len(errors), "median_abs_pct": round(100 * statistics.median(absolute), 2),
            "mean_abs_pct": round(100 * statistics.mean(absolute), 2),
            "median_signed_pct": round(100 * statistics.median(errors), 2),
            "within_10_pct": round(100 * sum(error <= 0.10 for error in absolute) / len(absolute), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compiled", type=Path)
    parser.add_argument("eager", type=Path)
    parser.add_argument("--log", type=Path, action="append", default=[], help="H200 measurement log (repeatable)")
    parser.add_argument("--sample", type=int, help="score analytic on this many pairs, drawn at random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    target = catalog().get(TARGET)
    logs = [MeasurementLog(path) for path in args.log]
    chosen = pairs(args.compiled, args.eager)
    measured_pairs = []
    for compiled_row, eager_row in chosen:
        compiled_w, eager_w = workload_from_row(compiled_row), workload_from_row(eager_row)
        if logs and measured(logs, compiled_w) and measured(logs, eager_w):
            measured_pairs.append((compiled_row, eager_row))
    if args.sample is not None:
        rest = [pair for pair in chosen if pair not in measured_pairs]
        chosen = measured_pairs + random.Random(args.seed).sample(rest, max(0, min(len(rest),
                                                                                args.sample - len(measured_pairs))))
    analytic, hostaware = AnalyticEstimator(), HostAwareEstimator()
    rows: list[dict[str, Any]] = []
    for number, (compiled_row, eager_row) in enumerate(chosen, start=1):
        compiled_w, eager_w = workload_from_row(compiled_row), workload_from_row(eager_row)
        truth = float(compiled_row["latency_ms"]) / float(eager_row["latency_ms"])
        row: dict[str, Any] = {"model": compiled_row["model"], "batch_size": int(compiled_row["batch_size"]),
                               "resolution": int(compiled_row["resolution"]), "measured_ratio": round(truth, 4)}
        compiled_ms, eager_ms = (analytic.estimate(w, target, HostInfo(), None).latency_ms
                                 for w in (compiled_w, eager_w))
        if compiled_ms and eager_ms:
            row["analytic_ratio"] = round(compiled_ms / eager_ms, 4)
        compiled_found, eager_found = measured(logs, compiled_w), measured(logs, eager_w)
        if compiled_found is not None and eager_found is not None:
            compiled_ms, eager_ms = (hostaware.estimate(w, target, host, measurement).latency_ms
                                     for w, (host, measurement) in ((compiled_w, compiled_found),
                                                                    (eager_w, eager_found)))
            if compiled_ms and eager_ms:
                row["hostaware_ratio"] = round(compiled_ms / eager_ms, 4)
                row["h200_ratio"] = round(compiled_found[1].device_ms / eager_found[1].device_ms, 4)
        rows.append(row)
        print(f"[{number}/{len(chosen)}] {json.dumps(row)}", file=sys.stderr)
    result = {
        name: summary([row[f"{name}_ratio"] / row["measured_ratio"] - 1 for row in rows if f"{name}_ratio" in row])
        for name in ("analytic", "hostaware", "h200")
    }
    result["measured_ratio_median"] = round(statistics.median(row["measured_ratio"] for row in rows), 4)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": result, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
