"""Choose an estimator's constants on ONE target's ground truth, and report them on the others.

    python benchmarks/accuracy/fit_constants.py hostaware --log LOG --choose-on "GeForce RTX 4090" FILES...
    python benchmarks/accuracy/fit_constants.py analytic --choose-on "GeForce RTX 3090" --mode infer FILES...

`hostaware` replays host measurements from a measurement log (recorded by `understudy evaluate` on the GPU host);
`analytic` needs no GPU. The objective is the mean |log(predicted / measured)| (scale-free, so large and small
workloads count alike), minimised by Nelder-Mead from the shipped constants. Parameters are, in order: the roofline's
tensor, simt, memory efficiencies and launch microseconds, then (hostaware) the host scaling's tensor, simt,
bandwidth efficiency and bytes per SM cycle, then the L2 reuse's fraction and usable share; `--fix 8=1` holds one
at a value (the shipped hostaware holds 6=1.012 7=144.1 8=1 9=0.5). Prints the constants to paste
into the estimator and the MAPE on every target/mode group.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.catalog import catalog
from understudy.workload import Workload, workload_from_row
from engine.counting import WorkloadCounts, count_workload
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.base import host_spec
from engine.estimators.hostaware import CONSTANTS, HostAwareConstants, HostScaling, blend_factor
from engine.estimators.roofline import Efficiency, L2Reuse, roofline_ms
from evaluation.evaluate import read_rows
from engine.measurement_log import MeasurementLog
from understudy.results import HostSetting


def load_counts(workloads: list[Workload], cache: Path | None) -> dict[str, WorkloadCounts]:
    known: dict[str, WorkloadCounts] = {}
    if cache and cache.exists():
        known = pickle.loads(cache.read_bytes())
    for workload in workloads:
        if workload.digest() not in known:
            known[workload.digest()] = count_workload(workload)
    if cache:
        cache.write_bytes(pickle.dumps(known))
    return known


def samples(args: argparse.Namespace) -> list[dict]:
    rows = read_rows(args.files, args.max_measured_ms)
    log = MeasurementLog(args.log) if args.log else None
    host = log.only_host() if log else None
    out = []
    workloads = {}
    for row in rows:
        if args.mode and row["mode"] != args.mode:
            continue
        try:
            workload = workload_from_row(row)
        except Exception:  # noqa: BLE001 - models this timm lacks are left out of the fit
            continue
        measurement = None
        if log is not None:
            measurement = log.get(host, workload, HostSetting(profile=True))
            if measurement is None or measurement.status != "done" or not measurement.kernel_ms:
                continue
        workloads[workload.digest()] = workload
        out.append({"row": row, "workload": workload, "target": catalog().get(row["target"]),
                    "measurement": measurement})
    counts = load_counts(list(workloads.values()), args.counts_cache)
    for sample in out:
        sample["counts"] = counts[sample["workload"].digest()]
    if host is not None:
        for sample in out:
            sample["host"] = host_spec(host)
    return out


def to_constants(kind: str, x: np.ndarray) -> HostAwareConstants | Efficiency:
    x = np.abs(x)
    roofline = Efficiency(*[float(v) for v in x[:4]])
    if kind == "analytic":
        return roofline
    return HostAwareConstants(scaling=HostScaling(*[float(v) for v in x[4:8]]), roofline=roofline,
                              reuse=L2Reuse(*[float(v) for v in x[8:10]]))


def predict(kind: str, constants, sample: dict) -> float:
    precision = sample["workload"].precision
    if kind == "analytic":
        return sum(roofline_ms(sample["counts"], sample["target"], precision, constants).values())
    factor, _ = blend_factor(sample["counts"], sample["measurement"], precision, sample["target"], sample["host"],
                             constants)
    return float(sample["measurement"].min_ms) * factor


def start(kind: str) -> np.ndarray:
    roofline = [EFFICIENCY.tensor, EFFICIENCY.simt, EFFICIENCY.memory, EFFICIENCY.launch_us]
    if kind == "analytic":
        return np.array(roofline)
    s, r, l2 = CONSTANTS.scaling, CONSTANTS.roofline, CONSTANTS.reuse
    return np.array([r.tensor, r.simt, r.memory, r.launch_us, s.tensor, s.simt, s.bandwidth_efficiency,
                     s.bytes_per_sm_cycle, l2.fraction, l2.usable])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("estimator", choices=["analytic", "hostaware"])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--choose-on", required=True, help="target name whose rows choose the constants")
    parser.add_argument("--mode", choices=["infer", "train"], help="rows of this mode choose the constants")
    parser.add_argument("--log", type=Path, help="measurement log (hostaware)")
    parser.add_argument("--max-measured-ms", type=float)
    parser.add_argument("--counts-cache", type=Path)
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--objective", choices=["log", "ape"], default="log",
                        help="minimise the mean |log(predicted/measured)| (default) or the mean APE itself")
    parser.add_argument("--fix", action="append", default=[], metavar="INDEX=VALUE",
                        help="hold parameter INDEX (position in the printed order) at VALUE")
    args = parser.parse_args()
    mode = args.mode
    args.mode = None
    data = samples(args)
    chosen = [s for s in data if s["row"]["target"] == args.choose_on and (mode is None or s["row"]["mode"] == mode)]
    if not chosen:
        raise SystemExit(f"no rows of {args.choose_on!r} to choose on")

    fixed = {int(i): float(v) for i, v in (item.split("=") for item in args.fix)}

    def full(x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=float)
        for index, value in fixed.items():
            x[index] = value
        return x

    def objective(x: np.ndarray) -> float:
        constants = to_constants(args.estimator, full(x))
        ratios = [predict(args.estimator, constants, s) / float(s["row"]["latency_ms"]) for s in chosen]
        if args.objective == "ape":
            return float(np.mean([abs(r - 1) for r in ratios]))
        return float(np.mean([abs(math.log(r)) for r in ratios]))

    result = minimize(objective, start(args.estimator), method="Nelder-Mead",
                      options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-7})
    constants = to_constants(args.estimator, full(result.x))
    groups: dict[str, list[float]] = defaultdict(list)
    for s in data:
        ape = abs(predict(args.estimator, constants, s) / float(s["row"]["latency_ms"]) - 1) * 100
        groups[f"{s['row']['target']} {s['row']['mode']}"].append(ape)
    report = {"estimator": args.estimator, "chosen_on": f"{args.choose_on} {mode or 'all modes'}",
              "held": {str(k): v for k, v in fixed.items()},
              "rows_chosen_on": len(chosen), "constants": repr(constants),
              "mape": {k: {"n": len(v), "mape": round(float(np.mean(v)), 2)} for k, v in sorted(groups.items())}}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
