"""The calibrated estimator's accuracy with k measured rows per timm file (k = 3, 5 and 10; 50 draws each).

For each timm file and k, `--draws` times: pick k of the file's rows at random as the user's measurements, fit
understudy.calibration.fit_correction to the base estimator's predictions of them (with their kernel-class shares),
and score the corrected predictions on the file's OTHER rows. The base's constants are the leave-one-GPU-out ones of
a `fit_constants.py --logo` report: a file of the RTX 3090 is predicted with the constants chosen on the RTX 4090,
and the other way round, so nothing the user did not measure was chosen on the target. `fitted_to_every_row_mape`
is the same correction fitted to all of a file's rows and scored on them: the floor of the correction's form,
whatever k. `nine_features_fitted_to_every_row_mape` asks the same of any correction linear (in log time) in what a
calibration could know of a workload without measuring it (workload_features), least squares over every row, scored
on those rows and with each row left out of its own fit: the floor of a far richer form than k points can fit.

`measured_on_the_other_card` is the calibration with points measured on another target: each file whose mode,
precision and format another card's file shares gets every row of that file as points measured there, and k = 0 or
5 of its own, for each share of the other card's residual tried (`--transfer-weights`; the shipped TRANSFER_WEIGHT
was chosen on the NCHW pair). `the_workload_alone_measured_there` is a federated population's case: each workload
the other card measured predicted from that one measurement alone, at TRANSFER_WEIGHT, over those rows. The training
file has no such partner.

    python benchmarks/accuracy/calibration.py analytic FILES... --logo-json analytic-logo.json --counts-cache C
    python benchmarks/accuracy/calibration.py hostaware FILES... --logo-json hostaware-logo.json --log LOG ...
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_constants import HOSTAWARE_HELD, Priced, group_of, load_samples, predict_with_shares
from understudy.calibration import (CLASSES, PRIOR_POINTS, TRANSFER_WEIGHT, Correction, FitPoint, fit_correction,
                                    log_residuals, no_correction, transfer_factor)

CHOSEN_WITHOUT = {"GeForce RTX 3090": "chosen_on_rtx4090", "GeForce RTX 4090": "chosen_on_rtx3090"}


@dataclass
class PricedFile:
    """One timm file's rows as the calibration sees them: the base's predictions, class shares and the measurements."""

    predicted: np.ndarray
    measured: np.ndarray
    modes: list[str]
    shares: list[dict[str, float]]
    digests: list[str]
    features: np.ndarray  # one row per workload (workload_features)

    @property
    def n(self) -> int:
        return len(self.measured)

    def fit_points(self, rows: Iterable[int]) -> list[FitPoint]:
        return [FitPoint(predicted_ms=self.predicted[i], measured_ms=self.measured[i], mode=self.modes[i],
                         shares=self.shares[i]) for i in rows]

    def mape(self, rows: Iterable[int], correction: Correction, carried: np.ndarray | None = None) -> float:
        """MAPE over `rows` of the base times the correction (times each row's carried-over factor)."""
        rows = list(rows)
        corrected = np.array([self.predicted[i] * correction.factor(self.shares[i], self.modes[i]) *
                              (carried[i] if carried is not None else 1.0) for i in rows])
        return float(np.mean(np.abs(corrected / self.measured[rows] - 1)) * 100)

    def feature_floor(self) -> dict[str, float]:
        """MAPE of the least-squares log correction in the workload features, over every row: fitted to all of them,
        and with each row's fit leaving it out."""
        residual = np.log(self.measured / self.predicted)
        fitted = self.features @ np.linalg.lstsq(self.features, residual, rcond=None)[0]
        left_out = np.array([self.features[i] @ np.linalg.lstsq(np.delete(self.features, i, axis=0),
                                                                np.delete(residual, i), rcond=None)[0]
                             for i in range(self.n)])
        return {"in_sample": _mape(fitted - residual), "leave_one_out": _mape(left_out - residual)}


def _mape(log_errors: np.ndarray) -> float:
    return round(float(np.mean(np.abs(np.exp(log_errors) - 1)) * 100), 2)


def priced_file(estimator: str, group: list, constants: dict) -> PricedFile:
    """The file's rows priced with the constants chosen without its GPU."""
    values = {**constants[CHOSEN_WITHOUT[group[0].row["target"]]], **(HOSTAWARE_HELD if estimator == "hostaware"
                                                                      else {})}
    predicted, shares = predict_with_shares(estimator, Priced(group), values)
    return PricedFile(predicted=predicted, measured=np.array([s.measured_ms for s in group]),
                      modes=[s.workload.mode for s in group],
                      shares=[dict(zip(CLASSES, row.tolist(), strict=True)) for row in shares],
                      digests=[s.workload.digest() for s in group],
                      features=workload_features(group, predicted, shares))


def workload_features(group: list, predicted: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Nine columns per workload, what is known of it unmeasured: an intercept, the base's tensor and SIMT shares of
    its prediction (the rest is the third class's) and, in logs, the predicted time, batch, pixels per image and the
    counted FLOPs, bytes and kernels."""
    return np.column_stack([
        np.ones(len(group)), shares[:, CLASSES.index("tensor")], shares[:, CLASSES.index("simt")],
        np.log(predicted), np.log([s.workload.batch_size for s in group]),
        np.log([s.workload.resolution[0] * s.workload.resolution[1] for s in group]),
        *(np.log([max(1.0, sum(getattr(kind, total) for kind in s.counts.kinds.values())) for s in group])
          for total in ("flops", "bytes", "ops"))])


def same_setting(a: str, b: str) -> bool:
    """Two timm files of one mode, precision and memory format (timm-infer-amp-nchw-rtx3090-pt240: the first four
    fields), so of other GPUs."""
    return a.split("-")[:4] == b.split("-")[:4]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("estimator", choices=["analytic", "hostaware"])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--logo-json", type=Path, required=True, help="a fit_constants.py --logo report")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--counts-cache", type=Path)
    parser.add_argument("--ks", default="3,5,10")
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prior", type=float, default=PRIOR_POINTS)
    parser.add_argument("--transfer-weights", default="0,0.3,0.5,0.7,1",
                        help="the shares of the other card's residuals tried (the shipped TRANSFER_WEIGHT is chosen "
                             "on the NCHW pair)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    constants = json.loads(args.logo_json.read_text())["constants"]
    samples = [s for s in load_samples(args.files, args.log, args.counts_cache, None)
               if not s.lambda_row and s.row["target"] in CHOSEN_WITHOUT]
    by_file: dict[str, list] = defaultdict(list)
    for sample in samples:
        by_file[group_of(sample)].append(sample)
    rng = random.Random(args.seed)
    files = {name: priced_file(args.estimator, group, constants) for name, group in sorted(by_file.items())}
    report = {}
    for name, f in files.items():
        # The floor of this correction's form: fitted to every row of the file with no pull toward zero-shot and
        # scored on those same rows, it is the best any number of the user's points could do.
        everything = fit_correction(f.fit_points(range(f.n)), prior_points=1e-6)
        report[name] = {"rows": f.n, "uncalibrated_mape": round(f.mape(range(f.n), no_correction()), 2),
                        "fitted_to_every_row_mape": round(f.mape(range(f.n), everything), 2),
                        "nine_features_fitted_to_every_row_mape": f.feature_floor()}
        for k in (int(v) for v in args.ks.split(",")):
            scores = []
            for _ in range(args.draws):
                chosen = set(rng.sample(range(f.n), k))
                rest = [i for i in range(f.n) if i not in chosen]
                scores.append(f.mape(rest, fit_correction(f.fit_points(chosen), prior_points=args.prior)))
            report[name][f"k={k}"] = {"mean": round(float(np.mean(scores)), 2), "min": round(min(scores), 2),
                                      "max": round(max(scores), 2)}
    transfer = {}
    for name, f in files.items():
        partner = next((other for other in files if other != name and same_setting(other, name)), None)
        if partner is None:
            continue
        # Every row of the other card's file as points measured there: its own correction, then each workload's
        # residual, as the calibrated estimator computes them.
        other = files[partner]
        other_points = other.fit_points(range(other.n))
        residuals = dict(zip(other.digests, log_residuals(other_points, fit_correction(other_points)), strict=True))
        # How far the workloads' zero-shot log residuals agree on the two cards: what there is to carry over.
        shared = [(i, other.digests.index(d)) for i, d in enumerate(f.digests) if d in residuals]
        here, there = (np.log(np.array([file.measured[j] / file.predicted[j] for j in rows]))
                       for file, rows in ((f, [i for i, _ in shared]), (other, [j for _, j in shared])))
        transfer[name] = {"measured_on": partner, "rows_measured_there": len(shared),
                          "residual_correlation": round(float(np.corrcoef(here, there)[0, 1]), 2)}
        # A federated population's case (POST /v1/populations with measurements): the workload itself measured on
        # the other card and nothing else there, so that card's correction is fitted to that one point.
        alone = np.ones(f.n)
        for i, j in shared:
            point = other_points[j]
            alone[i] = transfer_factor(log_residuals([point], fit_correction([point], prior_points=args.prior)))
        rows = [i for i, _ in shared]
        transfer[name]["the_workload_alone_measured_there"] = {
            "uncalibrated": round(f.mape(rows, no_correction()), 2),
            "calibrated": round(f.mape(rows, no_correction(), alone), 2)}
        draws = [sorted(rng.sample(range(f.n), 5)) for _ in range(args.draws)]
        for weight in (float(v) for v in args.transfer_weights.split(",")):
            carried = np.array([transfer_factor([residuals[d]] if d in residuals else [], weight) for d in f.digests])
            scores = [f.mape([i for i in range(f.n) if i not in chosen],
                             fit_correction(f.fit_points(chosen), prior_points=args.prior), carried)
                      for chosen in draws]
            transfer[name][f"weight={weight:g}"] = {"k=0": round(f.mape(range(f.n), no_correction(), carried), 2),
                                                    "k=5": round(float(np.mean(scores)), 2)}
    text = json.dumps({"estimator": args.estimator, "prior_points": args.prior, "draws": args.draws,
                       "files": report, "transfer_weight": TRANSFER_WEIGHT, "measured_on_the_other_card": transfer},
                      indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
