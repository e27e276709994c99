"""Choose an estimator's constants on some GPUs' ground truth and report them on GPUs they were not chosen on.

    python benchmarks/accuracy/fit_constants.py analytic FILES... --counts-cache C --logo --json OUT
    python benchmarks/accuracy/fit_constants.py hostaware FILES... --counts-cache C --log LOG --logo --json OUT

The protocol (`--logo`): every development GPU's rows are scored with constants chosen without them.
- the RTX 4090's timm rows and its Lambda ratio with constants chosen on every RTX 3090 timm row;
- the RTX 3090's timm rows with constants chosen on every RTX 4090 timm row;
- the other ten Lambda GPUs with constants chosen on all timm rows (they appear in no timm file); these are also the
  constants the estimator ships.
Lambda's rows come from another harness (NVIDIA's ResNet-50 training loop in NGC containers), so they are scored as
ratios to the same harness's RTX 3090 row at the same precision, which cancels the harness: the ratio error is
|predicted(T) / predicted(3090) / (measured(T) / measured(3090)) - 1|. They never choose constants.

The objective is the mean |log(predicted / measured)| (scale-free), minimised by Nelder-Mead from the shipped
constants, restarted where it stopped until that no longer helps, with shares of a unit's peak kept at most 1;
`--fix NAME=VALUE` holds one (names as printed). `--choose-on TARGET` instead chooses on one target's rows and
reports every file. Every row's ops are priced at once in numpy, so a fit over a few thousand rows takes seconds.
`hostaware` replays host measurements from a measurement log recorded by `understudy evaluate` on the GPU host. Its
rates are analytic's, so it holds analytic's constants of the same fold (`--analytic-logo`, an analytic `--logo`
report) and can choose only its blend weight; the shipped hostaware holds that too (`--fix roofline_weight=0.5`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize, minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from understudy.catalog import TargetSpec, catalog
from understudy.results import HostSetting, Measurement
from understudy.workload import Workload, workload_from_row
from count_cache import load_counts
from engine.counts import KINDS, WorkloadCounts
from engine.estimators.analytic import EFFICIENCY
from engine.estimators.base import host_spec
from engine.estimators.hostaware import CLASSES, CONSTANTS, HostAwareConstants
from engine.estimators.roofline import CLASS_OF_KIND, PLAIN_LANE_CONVOLUTIONS, Efficiency, L2Reuse
from evaluation.evaluate import read_rows
from engine.measurement_log import MeasurementLog

ROOFLINE = ("tensor", "simt", "memory", "launch_us", "matmul32", "layout", "strided", "bytes_per_sm_cycle",
            "strided_bytes_per_sm_cycle", "tensor_flop_per_sm_cycle", "training_overhead", "training_layout",
            "depthwise_training", "bf16_norm_training", "grouped_fp32_training", "l2_reuse", "serial_ns")
HOSTAWARE = (*ROOFLINE, "roofline_weight", "l2_fraction", "l2_usable")
# hostaware holds analytic's constants (given per fold by --analytic-logo) and the L2 reuse (set, not fitted).
HOSTAWARE_HELD = {"l2_fraction": 1.0, "l2_usable": 0.5}
# Which analytic constants each fold of a hostaware --logo fit holds.
ANALYTIC_FOLD = {"on_3090": "chosen_on_rtx3090", "on_4090": "chosen_on_rtx4090", "on_all": "chosen_on_all"}
# Kinds as codes in engine.counting's order, the class the roofline puts each in, and the plain-lane convolutions'
# codes (the error band's convolution share)
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
CLASS_CODE = np.array([CLASSES.index(CLASS_OF_KIND[kind]) for kind in KINDS])
CONVOLUTION_CODES = [KIND_CODE[kind] for kind in PLAIN_LANE_CONVOLUTIONS]
REFERENCE = "GeForce RTX 3090"
# Efficiencies that are a share of a unit's peak: a fit may not take them past it (a fold with few rows of a kind,
# such as fp32 matmuls under AMP, otherwise wanders there).
FRACTIONS_OF_PEAK = ("tensor", "simt", "memory", "matmul32")
# What no GeForce row can choose (logo): the limits that bind only on parts with far more bandwidth or tensor rate
# per SM than a GeForce card, and the fp32/bf16 depthwise and bf16 BatchNorm training multipliers (every GeForce
# row is fp16).
GEFORCE_UNIDENTIFIED = ("bytes_per_sm_cycle", "strided_bytes_per_sm_cycle", "tensor_flop_per_sm_cycle",
                        "depthwise_training", "bf16_norm_training", "grouped_fp32_training")
RESTARTS = 6  # Nelder-Mead runs at most, each from where the last stopped (fit)


@dataclass
class Sample:
    row: dict[str, str]
    workload: Workload
    target: TargetSpec
    counts: WorkloadCounts
    measurement: Measurement | None = None
    host: TargetSpec | None = None

    @property
    def measured_ms(self) -> float:
        return float(self.row["latency_ms"])

    @property
    def lambda_row(self) -> bool:
        return self.row["file"].startswith("lambda")

    @property
    def host_row(self) -> bool:
        return self.row["file"].startswith("h200-host")


def host_rows(paths: list[Path]) -> list[dict[str, str]]:
    """The host's own unrestricted measurements in measurement logs, as ground-truth rows of the host GPU: the H200
    as its own target, a source of truth for any precision and format (one file label per mode, format and
    precision)."""
    rows: dict[str, dict[str, str]] = {}
    for path in paths:
        log = MeasurementLog(path)
        name = host_spec(log.only_host()).name
        for line in path.read_text().splitlines():
            record = json.loads(line)
            setting, measurement = record.get("setting"), record.get("measurement")
            if (not setting or setting.get("sm_count") is not None or setting.get("clock_mode") != "none"
                    or measurement["status"] != "done" or not measurement.get("min_ms")):
                continue
            w = record["workload"]
            if w.get("torch_major", 2) != 2:
                continue  # measured for a PyTorch 1.x target's workload: not the host's own (PyTorch 2) step
            rows[record["key"]] = {
                "target": name, "model": w["model"], "mode": w["mode"], "precision": w["precision"],
                "batch_size": str(w["batch_size"]), "resolution": str(w["resolution"][0]),
                "memory_format": w["memory_format"], "optimizer": w.get("optimizer", "none"),
                "reparam": "true" if w.get("reparam") else "false",
                "compile": "true" if w.get("compile") else "false", "latency_ms": str(measurement["min_ms"]),
                "file": f"h200-host-{w['mode']}-{w['precision']}-{w['memory_format']}"
                        + ("-compile" if w.get("compile") else "")}
    return list(rows.values())


def load_samples(files: list[Path], log_path: Path | None, cache: Path | None,
                 max_measured_ms: float | None, host_logs: list[Path] | None = None,
                 cached_only: bool = False) -> list[Sample]:
    log = MeasurementLog(log_path) if log_path else None
    host = log.only_host() if log else None
    pending = []
    for row in [*read_rows(files, max_measured_ms), *host_rows(host_logs or [])]:
        try:
            workload = workload_from_row(row)
        except Exception:  # noqa: BLE001 - a model this timm lacks
            continue
        measurement = None
        if log is not None:
            assert host is not None
            measurement = log.get(host, workload, HostSetting(profile=True))
            if measurement is None or measurement.status != "done" or not measurement.kernel_ms:
                continue
        pending.append((row, workload, measurement))
    counts = load_counts(list({w.digest(): w for _, w, _ in pending}.values()), cache, cached_only)
    host_target = host_spec(host) if host is not None else None
    return [Sample(row, workload, catalog().get(row["target"]), found, measurement, host_target)
            for row, workload, measurement in pending if (found := counts.get(workload.digest())) is not None]


class Priced:
    """Every op of every sample, flattened, with what its target brings to it; priced for any constants at once."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples
        # Identical ops of a sample are priced once and counted `number` times (a ViT's blocks repeat every op).
        kinds, flops, moved, index, number = [], [], [], [], []
        for i, sample in enumerate(samples):
            for (kind, f, m), n in Counter(sample.counts.ops).items():
                kinds.append(KIND_CODE[kind])
                flops.append(f)
                moved.append(m)
                index.append(i)
                number.append(n)
        self.number = np.array(number, dtype=float)
        self.kind = np.array(kinds, dtype=int)
        self.flops = np.array(flops, dtype=float)
        self.moved = np.array(moved, dtype=float)
        self.index = np.array(index, dtype=int)
        self.n = len(samples)

        def per_op(values: list[float]) -> np.ndarray:
            return np.array(values, dtype=float)[self.index]

        precision = [s.workload.precision for s in samples]
        self.tensor_rate = per_op([s.target.sustained_tensor_tflops(p) * 1e12
                                   for s, p in zip(samples, precision, strict=True)])
        self.fp32_rate = per_op([s.target.sustained_fp32_tflops() * 1e12 for s in samples])
        self.depthwise_rate = self.fp32_rate * per_op([s.target.fp32_share_beside_int32() for s in samples])
        self.bandwidth = per_op([s.target.memory_bandwidth_gbps * 1e9 for s in samples])
        self.issue = per_op([s.target.sm_count * s.target.sustained_clock() * 1e6 for s in samples])
        self.tensor_issue = per_op([s.target.sm_count * s.target.tensor_clock(p) * 1e6
                                    for s, p in zip(samples, precision, strict=True)])
        self.l2 = per_op([s.target.l2_cache_mb * 1e6 for s in samples])
        self.measured = np.array([s.measured_ms for s in samples])
        self.training = np.array([s.workload.mode == "train" for s in samples])
        # Each sample's (precision, training) pair, coded: Efficiency's weights depend on it.
        steps = [(s.workload.precision, s.workload.mode == "train") for s in samples]
        self.steps = sorted(set(steps))
        self.step_code = np.array([self.steps.index(step) for step in steps], dtype=int)
        self.host_ms = np.array([s.measurement.device_ms if s.measurement else 0.0 for s in samples])
        shares = np.array([[s.measurement.kernel_ms.get(c, 0.0) if s.measurement else 0.0 for c in CLASSES]
                           for s in samples]).reshape(len(samples), 3)
        self.host_share = shares / np.maximum(shares.sum(axis=1, keepdims=True), 1e-12)
        self._on_host: Priced | None = None

    def _dram(self, moved: np.ndarray, l2: np.ndarray | float, reuse: L2Reuse) -> np.ndarray:
        capacity = reuse.usable * l2
        return moved * (1.0 - reuse.fraction * np.minimum(1.0, capacity / np.maximum(moved, 1.0)))

    def _per_op(self, weight: Callable[[str, str, bool], float]) -> np.ndarray:
        """One of Efficiency's weights, a function of (kind, precision, training), per op."""
        table = np.array([[weight(kind, *step) for kind in KINDS]
                          for step in self.steps]).reshape(len(self.steps), len(KINDS))
        return table[self.step_code[self.index], self.kind]

    def roofline(self, eff: Efficiency, reuse: L2Reuse | None) -> np.ndarray:
        """Milliseconds per sample and class (n x 3)."""
        cells = np.bincount(self.index * 3 + CLASS_CODE[self.kind], self._op_ms(eff, reuse), minlength=self.n * 3)
        return cells.reshape(self.n, 3)

    def convolution_share(self, eff: Efficiency, reuse: L2Reuse | None) -> np.ndarray:
        """Each sample's share of its roofline milliseconds in plain-lane convolutions (roofline.convolution_share)."""
        op_ms = self._op_ms(eff, reuse)
        total = np.bincount(self.index, op_ms, minlength=self.n)
        convolutions = np.bincount(self.index, op_ms * np.isin(self.kind, CONVOLUTION_CODES), minlength=self.n)
        return convolutions / np.maximum(total, 1e-12)

    def _op_ms(self, eff: Efficiency, reuse: L2Reuse | None) -> np.ndarray:
        """Milliseconds per op, times its number in its sample (engine.estimators.roofline.roofline_kind_ms)."""
        tensor_rate = self.tensor_rate * eff.tensor
        if eff.tensor_flop_per_sm_cycle > 0:
            feed = np.array([eff.tensor_feed(precision) for precision, _ in self.steps])
            tensor_rate = np.minimum(tensor_rate, self.tensor_issue * feed[self.step_code[self.index]])
        bytes_only = np.full_like(self.flops, np.inf)  # a memory-bound kind's FLOPs cost nothing
        plain_lanes = self.depthwise_rate * eff.simt
        rate_of_kind = {"tensor": tensor_rate, "matmul32": self.fp32_rate * eff.matmul32,
                        "depthwise": plain_lanes, "grouped": plain_lanes,
                        "serial": np.full_like(self.flops, eff.serial_rate())}
        rate = np.choose(self.kind, [rate_of_kind.get(kind, bytes_only) for kind in KINDS])
        weight = self._per_op(eff.bytes_weight)
        moved = self.moved * weight
        reuse = reuse or eff.reuse()
        if reuse is not None:
            moved = self._dram(moved, self.l2, reuse)
        bandwidth = self.bandwidth * eff.memory
        if eff.fused_memory > 0:  # roofline.Efficiency.bandwidth_gbps: inductor's kernels, their own share of peak
            bandwidth = np.where(self.kind == KIND_CODE["fused"], self.bandwidth * eff.fused_memory, bandwidth)
        if eff.bytes_per_sm_cycle > 0:
            bandwidth = np.minimum(bandwidth, self.issue * eff.bytes_per_sm_cycle)
        if eff.strided_bytes_per_sm_cycle > 0:
            bandwidth = np.where(self.kind == KIND_CODE["strided"],
                                 np.minimum(bandwidth, self.issue * eff.strided_bytes_per_sm_cycle), bandwidth)
        slower = self._per_op(eff.time_weight)
        seconds = np.maximum(self.flops / rate, moved / bandwidth) * slower + eff.launch_us * 1e-6
        return seconds * self.number * 1e3 * np.where(self.training, eff.training_overhead, 1.0)[self.index]

    def on_host(self) -> Priced:
        """The same ops priced on the host GPU (hostaware's class ratios)."""
        if self._on_host is None:
            host = self.samples[0].host
            assert host is not None
            self._on_host = Priced([Sample(s.row, s.workload, host, s.counts) for s in self.samples])
        return self._on_host

    def hostaware(self, constants: HostAwareConstants, eff: Efficiency) -> tuple[np.ndarray, np.ndarray]:
        """(predicted ms, each class's share of it) per sample, as engine.estimators.hostaware.blend_factor
        computes."""
        on_target = self.roofline(eff, constants.reuse)
        on_host = self.on_host().roofline(eff, constants.reuse)
        whole = on_target.sum(axis=1) / np.maximum(on_host.sum(axis=1), 1e-12)
        ratios = np.where(on_host > 0, on_target / np.maximum(on_host, 1e-12), whole[:, None])
        scaled = self.host_ms[:, None] * self.host_share * ratios
        roofline = on_target.sum(axis=1)
        w = constants.roofline_weight
        shares = (1 - w) * scaled / scaled.sum(axis=1, keepdims=True) + w * on_target / roofline[:, None]
        return scaled.sum(axis=1) ** (1 - w) * roofline ** w, shares


def constants_of(kind: str, values: dict[str, float]) -> tuple[Efficiency, HostAwareConstants | None]:
    roofline = Efficiency(**{name: values[name] for name in ROOFLINE})
    if kind == "analytic":
        return roofline, None
    return roofline, HostAwareConstants(roofline_weight=values["roofline_weight"],
                                        reuse=L2Reuse(fraction=values["l2_fraction"], usable=values["l2_usable"]))


def shipped(kind: str) -> dict[str, float]:
    values = {name: float(getattr(EFFICIENCY, name)) for name in ROOFLINE}
    if kind == "hostaware":
        values.update(roofline_weight=CONSTANTS.roofline_weight, l2_fraction=CONSTANTS.reuse.fraction,
                      l2_usable=CONSTANTS.reuse.usable)
    return values


def predict_with_shares(kind: str, priced: Priced, values: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Predicted ms per sample, and each kernel class's share of it (what the calibration fits scales to)."""
    eff, constants = constants_of(kind, values)
    if constants is None:
        by_class = priced.roofline(eff, None)
        total = by_class.sum(axis=1)
        return total, by_class / total[:, None]
    return priced.hostaware(constants, eff)


def predict(kind: str, priced: Priced, values: dict[str, float]) -> np.ndarray:
    return predict_with_shares(kind, priced, values)[0]


def hostaware_held() -> dict[str, float]:
    """What a hostaware fit holds unless told otherwise: the shipped analytic constants and the L2 reuse."""
    return {**shipped("analytic"), **HOSTAWARE_HELD}


def fit(kind: str, samples: list[Sample], fixed: dict[str, float]) -> dict[str, float]:
    """The constants minimising the mean |log(predicted / measured)| over `samples`, from the shipped ones."""
    names = ROOFLINE if kind == "analytic" else HOSTAWARE
    start = {**shipped(kind), **fixed}
    free = [name for name in names if name not in fixed]
    priced = Priced(samples)
    log_measured = np.log(priced.measured)

    def values_of(x: np.ndarray) -> dict[str, float]:
        return {**start, **{name: min(float(abs(v)), 1.0) if name in FRACTIONS_OF_PEAK else float(abs(v))
                            for name, v in zip(free, x, strict=True)}}

    def objective(x: np.ndarray) -> float:
        predicted = predict(kind, priced, values_of(x))
        return float(np.mean(np.abs(np.log(np.maximum(predicted, 1e-9)) - log_measured)))

    if not free:
        return values_of(np.array([]))
    if free == ["roofline_weight"]:
        # hostaware's one free constant, a weight in [0, 1]
        return values_of(np.array([minimize_scalar(lambda w: objective(np.array([w])), bounds=(0.0, 1.0),
                                                   method="bounded", options={"xatol": 1e-4}).x]))
    # Nelder-Mead stops where its simplex collapses, which on this objective (flat in some directions, kinked by
    # the caps) can be short of the minimum: from nearby starts a fold's optimum differed by half a point. Restarting
    # from where it stopped, with a fresh simplex, until a restart no longer lowers the objective, makes the result
    # depend much less on the start.
    x = np.array([start[name] for name in free])
    best = objective(x)
    for _ in range(RESTARTS):
        result = minimize(objective, x, method="Nelder-Mead", options={"maxiter": 3000, "xatol": 1e-4, "fatol": 1e-7})
        if result.fun > best - 1e-6:
            break
        x, best = result.x, float(result.fun)
    return values_of(x)


def group_of(sample: Sample) -> str:
    return sample.row["file"].removesuffix(".csv")


def score(kind: str, samples: list[Sample], values: dict[str, float]) -> dict[str, dict[str, float]]:
    """MAPE and bias per timm file; ratio error per Lambda GPU and precision."""
    predicted = predict(kind, Priced(samples), values) if samples else np.array([])
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[float]] = defaultdict(list)
    logs: dict[str, list[float]] = defaultdict(list)
    for sample, p in zip(samples, predicted, strict=True):
        if sample.lambda_row:
            continue
        groups[group_of(sample)].append(abs(p / sample.measured_ms - 1) * 100)
        logs[group_of(sample)].append(math.log(p / sample.measured_ms))
    for name, apes in sorted(groups.items()):
        out[name] = {"n": len(apes), "mape": round(float(np.mean(apes)), 2),
                     "bias": round(100 * (math.exp(float(np.mean(logs[name]))) - 1), 1),
                     "worst": round(float(np.max(apes)), 1)}
    for (target, precision), ratio in lambda_ratios(samples, predicted).items():
        out[f"lambda {target} {precision}"] = {"n": 1, "ratio_error": round(abs(ratio - 1) * 100, 2),
                                               "bias": round((ratio - 1) * 100, 1)}
    return out


def lambda_ratios(samples: list[Sample], predicted: np.ndarray) -> dict[tuple[str, str], float]:
    """Per Lambda (GPU, precision) but the reference's: its predicted time over the RTX 3090's at that precision,
    divided by the same ratio measured (1: the ratio is right)."""
    rows = {(s.row["target"], s.row["precision"]): (float(p), s.measured_ms)
            for s, p in zip(samples, predicted, strict=True) if s.lambda_row}
    ratios = {}
    for (target, precision), (p, measured) in sorted(rows.items()):
        reference = rows.get((REFERENCE, precision))
        if target != REFERENCE and reference is not None:
            ratios[(target, precision)] = p / reference[0] / (measured / reference[1])
    return ratios


def logo(kind: str, samples: list[Sample], fixed: dict[str, float],
         analytic_folds: dict[str, dict[str, float]] | None = None) -> dict:
    """The leave-one-GPU-out report. hostaware holds, in each fold, analytic's constants of that fold
    (`analytic_folds`: an analytic --logo report's "constants")."""
    host = [s for s in samples if s.host_row]
    timm = [s for s in samples if not s.lambda_row and not s.host_row]
    lam = [s for s in samples if s.lambda_row]

    def held(fold: str) -> dict[str, float]:
        if kind == "analytic":
            return fixed
        return {**hostaware_held(), **(analytic_folds or {}).get(ANALYTIC_FOLD[fold], {}), **fixed}

    on_3090 = fit(kind, [s for s in timm if s.row["target"] == REFERENCE] + host, held("on_3090"))
    on_4090 = fit(kind, [s for s in timm if s.row["target"] == "GeForce RTX 4090"] + host, held("on_4090"))
    on_all = fit(kind, timm + host, held("on_all"))
    pair = [s for s in lam if s.row["target"] in (REFERENCE, "GeForce RTX 4090")]
    table = {}
    table.update({k: v for k, v in score(kind, [s for s in timm if s.row["target"] == REFERENCE], on_4090).items()})
    table.update(score(kind, [s for s in timm if s.row["target"] == "GeForce RTX 4090"], on_3090))
    table.update(score(kind, pair, on_3090))
    others = [s for s in lam if s.row["target"] != "GeForce RTX 4090"]
    table.update({k: v for k, v in score(kind, others, on_all).items() if k.startswith("lambda")})
    constants = {"chosen_on_rtx3090": on_3090, "chosen_on_rtx4090": on_4090, "chosen_on_all": on_all}
    if host:
        # The host's own rows, with constants chosen on the two GeForce cards alone.
        # No GeForce row can choose GEFORCE_UNIDENTIFIED, so a fit over those rows alone moves them where nothing
        # holds them (the feed limit to 497 once, a fifth of what the H200 is fed; the bytes in flight from 8.4 to
        # 6.2). The fold holds their shipped values, the constants of it chosen with the H200's rows.
        unidentified = {name: shipped(kind)[name] for name in GEFORCE_UNIDENTIFIED}
        without_host = fit(kind, timm, {**unidentified, **fixed})
        table.update(score(kind, host, without_host))
        constants["chosen_on_timm_rows_alone"] = without_host
    return {"estimator": kind, "protocol": "leave-one-GPU-out (see the module docstring)", "held": fixed,
            "constants": constants, "scores": table, "chosen_on_all_scored_on_all": score(kind, samples, on_all)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("estimator", choices=["analytic", "hostaware"])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--logo", action="store_true", help="leave-one-GPU-out (see above)")
    parser.add_argument("--choose-on", help="choose on this target's rows (all modes) and report every file")
    parser.add_argument("--log", type=Path, help="measurement log (hostaware)")
    parser.add_argument("--host-rows", type=Path, action="append", default=[],
                        help="measurement log whose unrestricted host measurements join as rows of the host GPU "
                        "(analytic)")
    parser.add_argument("--max-measured-ms", type=float)
    parser.add_argument("--counts-cache", type=Path)
    parser.add_argument("--cached-only", action="store_true", help="leave out workloads the counts cache lacks")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE", help="hold a constant")
    parser.add_argument("--analytic-logo", type=Path,
                        help="an analytic --logo report: the analytic constants each hostaware fold holds "
                        "(default: the shipped ones)")
    args = parser.parse_args()
    if args.estimator == "hostaware" and args.log is None:
        parser.error("hostaware replays host measurements: give --log")
    fixed = {name: float(value) for name, value in (item.split("=") for item in args.fix)}
    samples = load_samples(args.files, args.log, args.counts_cache, args.max_measured_ms, args.host_rows,
                           args.cached_only)
    if args.logo:
        folds = json.loads(args.analytic_logo.read_text())["constants"] if args.analytic_logo else None
        report = logo(args.estimator, samples, fixed, folds)
    else:
        if args.estimator == "hostaware":
            fixed = {**hostaware_held(), **fixed}
        if not args.choose_on:
            parser.error("give --logo or --choose-on TARGET")
        chosen = [s for s in samples if s.row["target"] == args.choose_on and not s.lambda_row]
        if not chosen:
            raise SystemExit(f"no rows of {args.choose_on!r} to choose on")
        values = fit(args.estimator, chosen, fixed)
        report = {"estimator": args.estimator, "chosen_on": args.choose_on, "held": fixed, "constants": values,
                  "scores": score(args.estimator, samples, values)}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
