"""Self-prediction on the H200: a GPU-free estimator predicting the host must match the host's own
measurement of the same workload, in every precision and memory format.

Reads the workloads of benchmarks/accuracy/self/workloads.csv and their host measurements from measurement logs
recorded on the H200 (`understudy evaluate --measure-only`, benchmarks/accuracy/h200_measure.sh). Reports, per set
(precision x memory format) and mode, `analytic`'s MAPE and bias against the host GPU's time for the step
(Measurement.device_ms: the graph-timed step, or an eagerly timed one's kernels where the host's CPU held it back), the
worst ratio, and the predicted peak memory against the host's measured peak allocation.

    python benchmarks/accuracy/self_prediction.py LOG... --counts-cache /tmp/counts.pkl --json OUT.json \\
        [--workloads LIST.csv ...]

The training set (benchmarks/accuracy/training/workloads.csv, 64 workloads of today's PyTorch) is scored the same
way with --workloads naming its list, and every training workload of both sets with both lists and --mode train.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from count_cache import load_counts
from understudy.catalog import catalog
from understudy.results import HostSetting
from understudy.workload import workload_from_row
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.memory import GIB, predict_memory
from engine.estimators.roofline import roofline_ms
from evaluation.evaluate import read_rows
from engine.measurement_log import MeasurementLog

WORKLOADS = Path(__file__).resolve().parent / "self" / "workloads.csv"
H200 = "h200-sxm-141-gb"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--counts-cache", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workloads", type=Path, action="append",
                        help="a workload list the logs measured (default: the self-prediction set's); repeatable")
    parser.add_argument("--mode", choices=["train", "infer"], help="score only this mode's workloads")
    args = parser.parse_args()
    target = catalog().get(H200)
    measured = {}
    for path in args.logs:
        log = MeasurementLog(path)
        host = log.only_host()
        for row in read_rows(args.workloads or [WORKLOADS]):
            workload = workload_from_row(row)
            found = log.get(host, workload, HostSetting(profile=True))
            if found is not None and found.status == "done" and found.min_ms:
                measured[workload.digest()] = (row, workload, found)
    counts = load_counts([w for _, w, _ in measured.values()], args.counts_cache)
    groups: dict[str, list[dict]] = defaultdict(list)
    for digest, (_row, workload, found) in sorted(measured.items(), key=lambda item: item[1][0]["model"]):
        if counts.get(digest) is None:
            continue
        predicted = sum(roofline_ms(counts[digest], target, workload.precision, EFFICIENCY,
                                    training=workload.mode == "train").values())
        memory = predict_memory(counts[digest], workload).total_gb
        # The host reports decimal GB (engine.timing), the prediction GiB.
        peak = found.peak_memory_gb * 1e9 / GIB if found.peak_memory_gb else None
        label = f"{workload.precision} {workload.memory_format}"
        if args.mode and workload.mode != args.mode:
            continue
        for key in (f"{label} {workload.mode}",) if args.mode else (label, f"{label} {workload.mode}"):
            groups[key].append({"model": workload.model, "mode": workload.mode, "predicted_ms": predicted,
                                "measured_ms": found.device_ms, "predicted_gib": memory,
                                "measured_peak_gib": peak})
    if not args.mode:
        # A precision and format measured in one mode only would be printed twice, once under the mode's name.
        for key in [key for key in groups if key.rsplit(" ", 1)[0] in groups]:
            if len(groups[key]) == len(groups[key.rsplit(" ", 1)[0]]):
                del groups[key]
    report = {}
    for key, items in sorted(groups.items()):
        ratios = np.array([i["predicted_ms"] / i["measured_ms"] for i in items])
        memory = [i["predicted_gib"] / i["measured_peak_gib"] for i in items if i["measured_peak_gib"]]
        worst = max(items, key=lambda i: abs(math.log(i["predicted_ms"] / i["measured_ms"])))
        report[key] = {"n": len(items), "mape": round(float(np.mean(np.abs(ratios - 1))) * 100, 1),
                       "bias": round((math.exp(float(np.mean(np.log(ratios)))) - 1) * 100, 1),
                       "worst": f"{worst['model']} {worst['mode']} x{worst['predicted_ms'] / worst['measured_ms']:.2f}",
                       "memory_predicted_over_measured_median": round(float(np.median(memory)), 2) if memory else None}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
