"""Fit the error band (understudy/bands.py) to the estimators' leave-one-GPU-out residuals, check it on GPUs it
was not fitted on, and write the band model the product ships (understudy/data/error_bands.json).

    python benchmarks/accuracy/bands.py ../shared/groundtruth/timm-*[0-9].csv ../shared/groundtruth/lambda-*.csv \\
        --host-rows benchmarks/accuracy/h200-measurements.jsonl --host-rows benchmarks/accuracy/h200-train-nhwc.jsonl \\
        --host-rows benchmarks/accuracy/h200-precisions.jsonl --host-rows benchmarks/accuracy/self/h200-self.jsonl \\
        --host-rows benchmarks/accuracy/training/h200-training.jsonl \\
        --counts-cache benchmarks/accuracy/counts.xz --log benchmarks/accuracy/h200-measurements.jsonl \\
        --analytic-logo benchmarks/accuracy/analytic-logo.json \\
        --hostaware-logo benchmarks/accuracy/hostaware-logo.json --report-rows benchmarks/accuracy/report/rows.csv \\
        --memory benchmarks/accuracy/memory.json --calibration benchmarks/accuracy/calibration-hostaware.json \\
        --calibration benchmarks/accuracy/calibration-analytic.json \\
        --compiled-truth ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291-compile.csv \\
        --compiled-log benchmarks/accuracy/compile/h100-compile.jsonl \\
        --json benchmarks/accuracy/bands.json --write understudy/data/error_bands.json

The residuals, e = log(measured / predicted), one per row, each predicted as fit_constants.py --logo predicts it:
with the constants chosen without the row's GPU (the RTX 3090's rows, timm's and Lambda's, with those chosen on the
RTX 4090, and the other way round; the Lambda GPUs no fit saw with those chosen on every timm row). Each carries
what the band may use: the estimator, the mode, the target's architecture, whether it is power-limited, and the
predicted step's convolution share (the share of the target roofline's time in depthwise and grouped convolutions,
roofline.PLAIN_LANE_CONVOLUTIONS). A Lambda row is an
absolute residual here (another harness's training step is a workload a user may run too) and also carries its
ratio's residual to the same harness's RTX 3090 row, which the check scores. For analytic the H200's own rows
(--host-rows, predicted with the constants chosen on the timm rows alone) are a third development GPU: its training
rows are fitted on, its inference rows only scored. Training is where the development data is thin: one timm file
(PyTorch 1.12, one card) and Lambda's ResNet-50. Without the H200, leaving the RTX 3090 out would leave the training
term 24 Lambda rows of one well-tuned model to be fitted on (a band that holds 63 % of the timm training rows); the
H200's training set (today's PyTorch, CNNs, ViTs and hybrids in every precision and format) gives it many models'
rows on another GPU. Its inference rows would not add what the timm files' 2,800 rows on two cards lack, and
hostaware's host rows are the host measuring itself, no residual of a target.

The fit, per estimator: centred on the prediction (a development GPU's own bias, +6 % on one card and -5 % on
another, is no guide to the next GPU's); log(scale) is the least-squares line through log|e| over the features (a
term no row varies is left out); the residuals over their scale give the shipped quantiles, for analytic and
hostaware those of their absolute values mirrored about 0 (the sign of a development GPU's errors is its bias). The
spec and flops estimators, which choose no constants, are fitted the same way on the replayed report's rows
(--report-rows), their quantiles as they fall (they under-predict most steps). The memory margins come from
memory.py's report, and the calibration's narrowing from calibration.py's: the held-out MAPE of a calibrated
prediction over the uncalibrated one, with the target's own five points and with the workload measured on another
card; where the target measured the workload itself, the 90th percentile of a measurement's spread between its timed
windows (--log) over hostaware's median half-width.

A compiled workload's band is the eager one widened: compiled ground truth comes from one GPU (timm's compiled RTX
4090 file), so its effect cannot be fitted leave-one-GPU-out as a term. The shipped estimators (one constant of
analytic's, the fused share, chosen on the same file) are scored on them: hostaware on those whose compiled workload
--compiled-log measured, analytic on --compiled-sample rows. The widening is the factor on the scale that makes the
band hold 80 % of them, at least 1. It is fitted and scored on the same rows: the check reports it as such.

The check (`--json`), two ways. "coverage_leave_one_gpu_out": for each GPU of the development data the band is
fitted again on every other GPU's residuals and scored on this GPU's rows. "coverage_fitted_on_all": the shipped
band on every row. Each gives, per timm file, over Lambda's ratios and over the H200's own rows, the share of rows
whose measured time (Lambda: ratio) falls inside the 80 % band, and the median half-width of the band, (high - low)
/ 2 over the prediction; and the same over every timm and Lambda row together ("every timm and Lambda row").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_ratio import measured
from fit_constants import REFERENCE, Priced, Sample, constants_of, load_samples, predict, shipped
from engine.estimators import get_estimator
from engine.measurement_log import MeasurementLog
from evaluation.evaluate import read_rows
from understudy.catalog import catalog
from understudy.results import HostInfo
from understudy.workload import workload_from_row
from understudy.bands import (DEFAULT_COVERAGE, QUANTILE_LEVELS, BandModel, CalibrationShares,
                              EstimatorBand, MemoryMargin, Term)

VERSION = "4"
# Chip families with ground truth in development: the timm files' GeForce cards and the H200 host.
SEEN_ARCHITECTURES = ("Ampere", "Ada Lovelace", "Hopper")
# Under this share of its boost clock a target holds under load, it is power-limited (the RTX 3090, the fastest
# development card below its boost clock, holds 0.97 of it; the A100 PCIe 80 GB, the least limited of Lambda's
# power-limited cards, 0.86).
POWER_LIMITED_BELOW = 0.95
TERMS: tuple[Term, ...] = ("intercept", "train", "convolution_share", "unseen_architecture", "power_limited")
CHECKED_COVERAGE = DEFAULT_COVERAGE
# Which fold of a --logo report's constants predicts a row (fit_constants.logo's protocol).
FOLD_OF_TARGET = {REFERENCE: "chosen_on_rtx4090", "GeForce RTX 4090": "chosen_on_rtx3090"}
# The estimators whose standardized errors are shipped symmetric about 0 (see fit_band).
SYMMETRIC = ("analytic", "hostaware")
# The check's group of the timm files' and Lambda's rows together.
EVERY_TARGET_ROW = "every timm and Lambda row"


def residuals(kind: str, samples: list[Sample], folds: dict[str, dict[str, float]],
              model: BandModel) -> list[dict[str, Any]]:
    """One residual per row, each predicted with constants chosen without its GPU, with its features. A Lambda row
    also carries its ratio's residual ("ratio_e", but for the RTX 3090's, the reference), the ratio priced as
    fit_constants.logo prices it (the RTX 4090's and its reference with the constants chosen on the RTX 3090,
    the others' with those chosen on every timm row)."""
    lambda_rows = [s for s in samples if s.lambda_row]
    priced: dict[str, dict[int, tuple[float, float]]] = {}
    for fold in ("chosen_on_rtx3090", "chosen_on_rtx4090", "chosen_on_all"):
        predicted, shares = predict_with_convolution_share(kind, Priced(lambda_rows), {**shipped(kind), **folds[fold]})
        priced[fold] = {id(s): (float(p), float(share))
                        for s, p, share in zip(lambda_rows, predicted, shares, strict=True)}
    reference = {(s.row["precision"], fold): priced[fold][id(s)][0] / s.measured_ms
                 for s in lambda_rows if s.row["target"] == REFERENCE for fold in priced}
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.host_row:
            groups["chosen_on_timm_rows_alone"].append(sample)
        elif not sample.lambda_row:
            groups[FOLD_OF_TARGET[sample.row["target"]]].append(sample)
    out = []
    for fold, members in groups.items():
        predicted, shares = predict_with_convolution_share(kind, Priced(members), {**shipped(kind), **folds[fold]})
        for sample, p, share in zip(members, predicted, shares, strict=True):
            out.append(_row(kind, model, sample, math.log(sample.measured_ms / float(p)), float(share),
                            sample.row["file"].removesuffix(".csv")))
    for sample in lambda_rows:
        target = sample.row["target"]
        own = FOLD_OF_TARGET.get(target, "chosen_on_all")
        p, share = priced[own][id(sample)]
        row = _row(kind, model, sample, math.log(sample.measured_ms / p), share, "lambda")
        if target != REFERENCE and (sample.row["precision"], own) in reference:
            ratio_fold = "chosen_on_rtx3090" if target == "GeForce RTX 4090" else "chosen_on_all"
            predicted_ratio = priced[ratio_fold][id(sample)][0] / sample.measured_ms
            row["ratio_e"] = math.log(reference[(sample.row["precision"], ratio_fold)] / predicted_ratio)
        out.append(row)
    return out


def predict_with_convolution_share(kind: str, priced: Priced,
                                   values: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Predicted ms per sample, and each one's convolution share (the target roofline's, as the estimators give
    it: analytic's with its own L2 reuse, hostaware's with the blend's)."""
    eff, constants = constants_of(kind, values)
    return predict(kind, priced, values), priced.convolution_share(eff, constants.reuse if constants else None)


def _row(kind: str, model: BandModel, sample: Sample, error: float, convolution_share: float,
         group: str) -> dict[str, Any]:
    return {"group": group, "gpu": sample.row["target"], "precision": sample.row["precision"], "e": error,
            "features": model.features(kind, sample.workload.mode, sample.target, convolution_share)}


def report_residuals(kind: str, path: Path, model: BandModel) -> list[dict[str, Any]]:
    """The residuals of an estimator with no constants (the paper's spec and flops), from the replayed report's rows
    (report/rows.csv): nothing was chosen on them, so every row is held out. Their convolution share is unknown."""
    out = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row[f"{kind}_outcome"] != "done" or not row[f"{kind}_predicted_ms"]:
                continue
            target = catalog().get(row["target"])
            features = model.features(kind, row["mode"], target, None)  # type: ignore[arg-type]
            out.append({"group": "report", "gpu": row["target"], "precision": row["precision"],
                        "e": math.log(float(row["measured_ms"]) / float(row[f"{kind}_predicted_ms"])),
                        "features": features})
    return out


def design(rows: list[dict[str, Any]], model: BandModel) -> np.ndarray:
    return np.array([[values[term] for term in TERMS]
                     for values in (model.term_values(row["features"]) for row in rows)])


def fit_band(rows: list[dict[str, Any]], model: BandModel, kind: str) -> EstimatorBand:
    """The band of one estimator's residuals (see the module docstring). Centred on the prediction: a development
    GPU's own bias (+6 % on one card, -5 % on another) is no guide to the next GPU's. For the SYMMETRIC kinds the
    standardized quantiles are those of |z|, mirrored about 0: the sign of the development rows' errors is their
    GPUs' bias, which the next GPU need not share, so only their size is carried over."""
    error = np.array([row["e"] for row in rows])
    x = design(rows, model)
    # A term no row varies cannot be told from the intercept: left out (coefficient 0). Nor may a target the
    # development data did not cover make a prediction surer: an unseen architecture's or a power limit's term that
    # comes out below 0 (four Lambda rows decide the first) is left out too.
    used = [i for i in range(x.shape[1]) if i == 0 or np.ptp(x[:, i]) > 0]
    never_narrower = {TERMS.index("unseen_architecture"), TERMS.index("power_limited")}
    while True:
        coefficients, *_ = np.linalg.lstsq(x[:, used], np.log(np.abs(error) + 1e-4), rcond=None)
        narrower = [i for i, value in zip(used, coefficients, strict=True) if i in never_narrower and value < 0]
        if not narrower:
            break
        used = [i for i in used if i not in narrower]
    full = np.zeros(x.shape[1])
    full[used] = coefficients
    standardized = error / np.exp(x @ full)
    if kind in SYMMETRIC:
        levels = np.array(QUANTILE_LEVELS)
        z = np.sign(levels - 0.5) * np.quantile(np.abs(standardized), np.abs(2 * levels - 1))
    else:
        z = np.quantile(standardized, QUANTILE_LEVELS)
    return EstimatorBand(center={"intercept": 0.0},
                         log_scale={term: round(float(full[i]), 5) for i, term in enumerate(TERMS)},
                         z=tuple(round(float(v), 5) for v in z), rows=len(rows))


def check(rows: list[dict[str, Any]], model: BandModel, kind: str,
          elsewhere: list[dict[str, Any]] | None = None, leave_gpu_out: bool = True) -> dict[str, Any]:
    """Coverage and half-width of the 80 % band on each GPU, the band fitted without that GPU (or, without
    `leave_gpu_out`, on every row), and on `elsewhere` (rows never fitted on) the band fitted on every row.

    A Lambda ratio's band is the two predictions' bands combined: its scale sqrt(s_T^2 + s_R^2 - 2 rho s_T s_R),
    rho the correlation of the two errors (the same workload in the same harness, largely shared), chosen on the
    fitted rows' ratios so that the 80 % band holds 80 % of them (ratio_correlation)."""
    covered: dict[str, list[bool]] = defaultdict(list)
    widths: dict[str, list[float]] = defaultdict(list)

    def score(fitted: list[dict[str, Any]], scored: list[dict[str, Any]]) -> None:
        fold = model.model_copy(update={"estimators": {kind: fit_band(fitted, model, kind)}})
        rho = ratio_correlation(fold, [r for r in fitted if "ratio_e" in r], rows)
        for row in scored:
            if row["group"] == "lambda" and "ratio_e" not in row:
                continue  # the RTX 3090's: the ratios' reference
            low, high, error = _bounds(fold, row, rows, rho)
            covered[row["group"]].append(low <= math.exp(error) <= high)
            widths[row["group"]].append((high - low) / 2)

    if leave_gpu_out:
        for gpu in sorted({row["gpu"] for row in rows}):
            score([r for r in rows if r["gpu"] != gpu], [r for r in rows if r["gpu"] == gpu])
    else:
        score(rows, rows)
    if elsewhere:
        score(rows, elsewhere)
    for group in [g for g in covered if g.startswith(("timm-", "lambda"))]:
        covered[EVERY_TARGET_ROW] += covered[group]
        widths[EVERY_TARGET_ROW] += widths[group]
    return {group: {"rows": len(hits), "coverage": round(100 * sum(hits) / len(hits), 1),
                    "median_half_width": round(100 * float(np.median(widths[group])), 1)}
            for group, hits in sorted(covered.items())}


def _bounds(fold: BandModel, row: dict[str, Any], rows: list[dict[str, Any]],
            rho: float) -> tuple[float, float, float]:
    """(low, high) multipliers of the row's 80 % band, and the error they bound: a Lambda row's ratio error, with
    the ratio's band."""
    band = fold.band(row["features"])
    assert band is not None
    if "ratio_e" not in row:
        return (*band.multipliers(CHECKED_COVERAGE), row["e"])
    reference = next(r for r in rows if r["group"] == "lambda" and r["gpu"] == REFERENCE
                     and r["precision"] == row["precision"])
    theirs = fold.band(reference["features"])
    assert theirs is not None
    scale = math.sqrt(max(band.scale**2 + theirs.scale**2 - 2 * rho * band.scale * theirs.scale, 1e-12))
    return (*band.model_copy(update={"scale": scale}).multipliers(CHECKED_COVERAGE), row["ratio_e"])


def ratio_correlation(fold: BandModel, ratios: list[dict[str, Any]], rows: list[dict[str, Any]]) -> float:
    """The correlation (0 to 0.95, by 0.05) at which the fold's ratio bands hold closest to 80 % of `ratios`."""
    def coverage(rho: float) -> float:
        hits = [low <= math.exp(error) <= high for low, high, error in (_bounds(fold, r, rows, rho) for r in ratios)]
        return sum(hits) / len(hits)

    if not ratios:
        return 0.0
    return min((step / 20 for step in range(20)), key=lambda rho: (abs(coverage(rho) - CHECKED_COVERAGE), -rho))


def calibration_shares(paths: list[Path], measured_here: float) -> CalibrationShares:
    """How much calibrating narrows a band, from calibration.py's reports: the held-out MAPE of a calibrated
    prediction over the uncalibrated one, averaged over files and estimators (never above 1: a calibration that does
    not help leaves the band as it is); `measured_here` where the target measured the workload itself."""
    own, elsewhere = [], []
    for path in paths:
        report = json.loads(path.read_text())
        for scores in report["files"].values():
            own.append(scores["k=5"]["mean"] / scores["uncalibrated_mape"])
        for scores in report["measured_on_the_other_card"].values():
            alone = scores["the_workload_alone_measured_there"]
            elsewhere.append(alone["calibrated"] / alone["uncalibrated"])
    return CalibrationShares(points=round(min(1.0, float(np.mean(own))), 3),
                             measured_elsewhere=round(min(1.0, float(np.mean(elsewhere))), 3),
                             measured_here=round(measured_here, 3))


def timing_spread(log: Path) -> float:
    """How much one timing of a step differs from another: the 90th percentile, over the log's measurements, of the
    spread of a measurement's timed windows over its fastest."""
    spreads = []
    for line in log.read_text().splitlines():
        found = json.loads(line).get("measurement") or {}
        if found.get("status") == "done" and found.get("min_ms") and found.get("spread_ms") is not None:
            spreads.append(found["spread_ms"] / found["min_ms"])
    return float(np.quantile(spreads, 0.9))


def half_width(band: EstimatorBand, rows: list[dict[str, Any]], model: BandModel, kind: str) -> float:
    """The median half-width of `band`'s 80 % interval over `rows`."""
    fitted = model.model_copy(update={"estimators": {kind: band}})
    return float(np.median([(high - low) / 2 for low, high in _multipliers(rows, fitted)]))


def _multipliers(rows: list[dict[str, Any]], model: BandModel) -> list[tuple[float, float]]:
    """Each row's (low, high) multipliers of its band at CHECKED_COVERAGE."""
    bands = [model.band(row["features"]) for row in rows]
    assert all(band is not None for band in bands)
    return [band.multipliers(CHECKED_COVERAGE) for band in bands if band is not None]


def compiled_residuals(kind: str, truth_path: Path, logs: list[Path], sample: int,
                       model: BandModel) -> list[dict[str, Any]]:
    """The residuals of the shipped estimator on compiled ground truth: hostaware's on the rows whose
    compiled workload a log measured, analytic's on `sample` rows drawn at random (seeded)."""
    rows = read_rows([truth_path])
    if kind != "hostaware":
        rows = random.Random(0).sample(rows, min(sample, len(rows)))
    host_logs = [MeasurementLog(path) for path in logs] if kind == "hostaware" else []
    estimator, out = get_estimator(kind), []
    for row in rows:
        workload = workload_from_row(row)
        found = measured(host_logs, workload)
        if not workload.compile or (kind == "hostaware" and found is None):
            continue
        host, measurement = found or (HostInfo(), None)
        target = catalog().get(row["target"])
        estimate = estimator.estimate(workload, target, host, measurement)
        if not estimate.latency_ms:
            continue
        share = estimate.details.get("convolution_share")
        out.append({"group": "compiled", "gpu": row["target"], "precision": row["precision"],
                    "e": math.log(float(row["latency_ms"]) / estimate.latency_ms),
                    "features": model.features(kind, workload.mode, target, share, compiled=True)})
    return out


def covered(rows: list[dict[str, Any]], model: BandModel) -> dict[str, float]:
    """The share of the rows inside the band at CHECKED_COVERAGE, and its median half-width."""
    bounds = _multipliers(rows, model)
    inside = [low <= math.exp(row["e"]) <= high for row, (low, high) in zip(rows, bounds, strict=True)]
    return {"coverage_pct": round(100 * float(np.mean(inside)), 1),
            "median_half_width_pct": round(100 * float(np.median([(high - low) / 2 for low, high in bounds])), 1)}


def compiled_widening(rows: list[dict[str, Any]], model: BandModel) -> float:
    """The factor on the scale that makes the band hold CHECKED_COVERAGE of these compiled rows (at least 1): each
    row's own smallest factor that covers it, and their CHECKED_COVERAGE quantile."""
    eager = [{**row, "features": row["features"].model_copy(update={"compiled": False})} for row in rows]
    needed = [row["e"] / math.log(high) if row["e"] > 0 else row["e"] / math.log(low)
              for row, (low, high) in zip(rows, _multipliers(eager, model), strict=True)]
    return round(max(1.0, float(np.quantile(needed, CHECKED_COVERAGE))), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--counts-cache", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True, help="the H200's measurement log (hostaware)")
    parser.add_argument("--host-rows", type=Path, action="append", default=[],
                        help="measurement logs whose host measurements are rows of the H200 itself (analytic)")
    parser.add_argument("--analytic-logo", type=Path, required=True)
    parser.add_argument("--hostaware-logo", type=Path, required=True)
    parser.add_argument("--report-rows", type=Path, required=True,
                        help="the replayed report's rows.csv (the spec and flops estimators' residuals)")
    parser.add_argument("--memory", type=Path, required=True, help="memory.py's report (its margins)")
    parser.add_argument("--calibration", type=Path, action="append", required=True,
                        help="calibration.py's reports")
    parser.add_argument("--compiled-truth", type=Path, required=True,
                        help="compiled ground truth (timm's compiled RTX 4090 file): the compiled band's widening")
    parser.add_argument("--compiled-log", type=Path, action="append", required=True,
                        help="the host's measurements of compiled workloads (hostaware's compiled rows)")
    parser.add_argument("--compiled-sample", type=int, default=200, help="analytic's compiled rows, drawn at random")
    parser.add_argument("--json", type=Path, help="write the check here")
    parser.add_argument("--write", type=Path, help="write the band model here")
    args = parser.parse_args()
    margins = json.loads(args.memory.read_text())["margins"]
    model = BandModel(version=VERSION, seen_architectures=SEEN_ARCHITECTURES, power_limited_below=POWER_LIMITED_BELOW,
                      estimators={},
                      memory=MemoryMargin(infer=(margins["infer"]["low"], margins["infer"]["high"]),
                                          train=(margins["train"]["low"], margins["train"]["high"])),
                      calibration=CalibrationShares(points=1.0, measured_elsewhere=1.0, measured_here=1.0))
    bands, report = {}, {}
    for kind, logo_path, log in (("analytic", args.analytic_logo, None), ("hostaware", args.hostaware_logo, args.log)):
        folds = json.loads(logo_path.read_text())["constants"]
        samples = load_samples(args.files, log, args.counts_cache, None, args.host_rows if log is None else None,
                               cached_only=True)
        found = residuals(kind, samples, folds, model)
        # The H200's training rows are fitted on, its inference rows only scored (see the module docstring).
        rows = [r for r in found if not (r["group"].startswith("h200-host") and r["features"].mode == "infer")]
        bands[kind] = fit_band(rows, model, kind)
        if kind == "hostaware":
            hostaware_rows = rows
        report[kind] = {"coverage_leave_one_gpu_out": check(rows, model, kind, [r for r in found if r not in rows]),
                        "coverage_fitted_on_all": check(rows, model, kind, leave_gpu_out=False),
                        "band": bands[kind].model_dump()}
    widening, fitted = {}, model.model_copy(update={"estimators": bands})
    for kind in ("analytic", "hostaware"):
        compiled = compiled_residuals(kind, args.compiled_truth, args.compiled_log, args.compiled_sample, model)
        widening[kind] = compiled_widening(compiled, fitted)
        report[kind]["compiled"] = {"rows": len(compiled), "widening": widening[kind],
                                    "coverage_before": covered(compiled, fitted),
                                    "coverage_after": covered(compiled, fitted.model_copy(
                                        update={"compiled_widening": widening}))}
    for kind in ("spec", "flops"):
        bands[kind] = fit_band(report_residuals(kind, args.report_rows, model), model, kind)
        report[kind] = {"band": bands[kind].model_dump()}
    # A workload the target measured itself is answered with that measurement: what is left of the band is how much
    # one timing of a step differs from another, against the default estimator's half-width.
    here = timing_spread(args.log) / half_width(bands["hostaware"], hostaware_rows, model, "hostaware")
    released = model.model_copy(update={"estimators": bands, "compiled_widening": widening,
                                       "calibration": calibration_shares(args.calibration, here)})
    report["memory"] = released.memory.model_dump()
    report["calibration"] = released.calibration.model_dump()
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    if args.write:
        args.write.write_text(json.dumps(released.model_dump(mode="json"), indent=1) + "\n")


if __name__ == "__main__":
    main()
