"""The calibrated estimator: a base estimator's prediction for a target, times a correction fitted to a few step
times the user measured on that target (its calibration), times what the calibration's points measured on other
targets say of the same workload. A workload the target itself measured is answered with its measurement.

It predicts through the engine (the Runner): the base predicts the workload and every calibration point's workload
on the same host, sharing measurements, and understudy.calibration fits the correction to (those predictions, the
measured times): one scale per kernel class and per mode, from the base's class shares. What a point says beyond its
target's correction is kept by workload: a point of this target answers its own workload, and a point measured on
another target (predicted there and fitted with that target's other points) carries to the same workload here.
Fitting runs the base on every point, so a fit is kept in runner.fits by fit_key; the service's worker stores them
with the calibration across jobs. Where it runs is its base's business: its identity names the base, the calibration
and the base's host.
"""

from __future__ import annotations

import math
from typing import Any

from understudy.bands import band_model
from understudy.calibration import (CalibrationPoint, CalibrationSet, Correction, FitPoint, fit_correction,
                                    log_residuals, no_correction, transfer_factor)
from understudy.catalog import TargetSpec, catalog
from understudy.errors import NotCalibrated, UnderstudyError
from understudy.estimator_info import CALIBRATED_ESTIMATOR, estimator_info
from understudy.keys import ANY_HOST, CacheIdentity, cache_identity
from understudy.results import HostInfo, HostSetting, Measurement, PredictionResult, Status
from understudy.workload import Workload
from engine.estimators.base import Calibrations, Estimate, Estimator, Progress, Runner

_NOT_PER_TARGET = "the calibrated estimator predicts through its base (CalibratedEstimator.predict), not per target"


def _measured_on(point: CalibrationPoint, target: TargetSpec) -> TargetSpec:
    """The target a calibration point of `target` was measured on."""
    return catalog().get(point.measured_on) if point.measured_on and point.measured_on != target.id else target


def _by_workload(points: list[tuple[FitPoint, str]], correction: Correction) -> dict[str, list[float]]:
    """The points' log residuals beyond `correction`, by the digest of each point's workload."""
    found: dict[str, list[float]] = {}
    for residual, (_, digest) in zip(log_residuals([p for p, _ in points], correction), points, strict=True):
        found.setdefault(digest, []).append(residual)
    return found


class CalibratedEstimator(Estimator):
    name = CALIBRATED_ESTIMATOR
    version = estimator_info(CALIBRATED_ESTIMATOR).version
    # Where it runs is its base's business (the engine checks the base); on its own it touches no GPU.
    needs_gpu = False

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        raise UnderstudyError(_NOT_PER_TARGET)

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        raise UnderstudyError(_NOT_PER_TARGET)

    def base(self, runner: Runner, calibration: CalibrationSet | None) -> Estimator:
        """The estimator a calibration corrects: the one it names, else the runner's default."""
        name = (calibration.base_estimator if calibration is not None else None) or runner.default_estimator()
        if name == CALIBRATED_ESTIMATOR:
            raise UnderstudyError("a calibration's base estimator cannot be the calibrated estimator itself")
        return runner.estimator(name)

    def identity(self, runner: Runner, target: TargetSpec, calibrations: Calibrations) -> CacheIdentity:
        """The version names the base and the target's calibration; the host is the base's."""
        calibration = calibrations.get(target.id)
        return self._identity(runner, self.base(runner, calibration), calibration)

    def _identity(self, runner: Runner, base: Estimator, calibration: CalibrationSet | None) -> CacheIdentity:
        return cache_identity(base.name, base.version, runner.host.fingerprint if base.needs_gpu else None,
                              calibration.digest() if calibration is not None else "none")

    def fit_key(self, runner: Runner, calibration: CalibrationSet, target: TargetSpec, base: Estimator) -> str:
        """What a fit depends on: the points, the target, the base estimator@version, the host it measured on and
        this estimator's version (what a fit holds). It starts with the points' digest: the worker stores a
        calibration's fits by it."""
        host_key = base.identity(runner, target, {}).host_key
        return (f"{calibration.digest()[:16]}/{target.digest()[:16]}/{base.name}@{base.version}/{host_key}/"
                f"{self.name}@{self.version}")

    def predict(self, runner: Runner, workload: Workload, targets: list[TargetSpec], progress: Progress | None,
                calibrations: Calibrations) -> list[PredictionResult]:
        """The base's prediction for each target times the correction fitted to that target's calibration points; a
        target without a calibration gets a failed result saying so."""
        results: list[PredictionResult | None] = [None] * len(targets)
        by_base: dict[str, list[int]] = {}
        for i, target in enumerate(targets):
            calibration = calibrations.get(target.id)
            try:
                if calibration is None:
                    raise NotCalibrated(
                        f"target {target.name} ({target.id}) has no calibration: the calibrated estimator needs a few "
                        f"measured step times of it (POST /v1/targets/{target.id}/calibrations; on the command "
                        "line, --calibration), or use another estimator")
                base = self.base(runner, calibration)
            except UnderstudyError as exc:
                results[i] = self._failure(runner, workload, target, calibration, str(exc))
                continue
            by_base.setdefault(base.name, []).append(i)
        for name, members in by_base.items():
            base = runner.estimator(name)
            group = [targets[i] for i in members]
            predicted = runner.predict(workload, group, name, progress)
            fits = self._fit(runner, base, [(target, calibrations[target.id]) for target, result in
                                            zip(group, predicted, strict=True) if result.status == Status.done],
                             progress)
            for i, result in zip(members, predicted, strict=True):
                target = targets[i]
                calibration = calibrations[target.id]
                results[i] = self._calibrated(runner, workload, calibration, base, result,
                                              fits.get(self.fit_key(runner, calibration, target, base)))
        return [result for result in results if result is not None]

    def _fit(self, runner: Runner, base: Estimator, pairs: list[tuple[TargetSpec, CalibrationSet]],
             progress: Progress | None) -> dict[str, dict[str, Any]]:
        """The fit of each (target, calibration), from runner.fits or made now: the base predicts every point's
        workload (one prediction per distinct workload, over the targets it calibrates; they share measurements),
        then fit_correction over (those predictions and their kernel-class shares, the measured times). A fit that
        fails carries an "error" and is not kept."""
        todo = [(target, calibration) for target, calibration in pairs
                if self.fit_key(runner, calibration, target, base) not in runner.fits]
        by_workload: dict[str, tuple[Workload, dict[str, TargetSpec]]] = {}
        for target, calibration in todo:
            for point in calibration.points:
                on = _measured_on(point, target)
                by_workload.setdefault(point.workload.digest(), (point.workload, {}))[1][on.id] = on
        predicted: dict[tuple[str, str], PredictionResult] = {}
        for digest, (point_workload, point_targets) in by_workload.items():
            for result in runner.predict(point_workload, list(point_targets.values()), base.name, progress):
                predicted[(digest, result.target_id)] = result
        fits = {}
        for target, calibration in pairs:
            key = self.fit_key(runner, calibration, target, base)
            if key in runner.fits:
                fits[key] = runner.fits[key]
                continue
            points = [predicted[(point.workload.digest(), _measured_on(point, target).id)]
                      for point in calibration.points]
            # The usable points by the target they were measured on, each with its workload's digest.
            groups: dict[str, list[tuple[FitPoint, str]]] = {}
            for result, point in zip(points, calibration.points, strict=True):
                if result.status == Status.done and result.latency_ms:
                    groups.setdefault(result.target_id, []).append((
                        FitPoint(predicted_ms=result.latency_ms, measured_ms=point.measured_ms,
                                 mode=point.workload.mode, shares=result.details.get("class_shares")),
                        point.workload.digest()))
            if not groups:
                reasons = "; ".join(dict.fromkeys(f"{r.status.value}: {r.error}" for r in points))
                fits[key] = {"error": f"none of the {len(points)} calibration points of {target.id} could be "
                                      f"predicted by {base.name} ({reasons})"}
                continue
            own = groups.pop(target.id, [])
            correction = fit_correction([fit_point for fit_point, _ in own]) if own else no_correction()
            # What each point says beyond its target's correction is its workload's: here, the target's own; for
            # every other target, after a correction of that target's own.
            here = _by_workload(own, correction)
            elsewhere: dict[str, list[float]] = {}
            for members in groups.values():
                for digest, residuals in _by_workload(members, fit_correction([p for p, _ in members])).items():
                    elsewhere.setdefault(digest, []).extend(residuals)
            fits[key] = runner.fits[key] = {
                "correction": correction.model_dump(),
                "points_used": len(own) + sum(len(members) for members in groups.values()),
                "here": here,
                "elsewhere": elsewhere,
                "base_points_ms": [r.latency_ms if r.status == Status.done else None for r in points],
            }
        return fits

    def _calibrated(self, runner: Runner, workload: Workload, calibration: CalibrationSet, base: Estimator,
                    result: PredictionResult, fit: dict[str, Any] | None) -> PredictionResult:
        details: dict[str, Any] = {
            "base_estimator": base.name, "base_version": base.version, "calibration": calibration.digest(),
            "points": len(calibration.points), "base_latency_ms": result.latency_ms, "base_details": result.details,
        }
        named = {"estimator": CALIBRATED_ESTIMATOR,
                 "estimator_version": self._identity(runner, base, calibration).version}
        if result.status != Status.done:
            return result.model_copy(update={**named, "details": details})
        if fit is None or "error" in fit:
            reason = fit["error"] if fit else "the calibration was not fitted"
            return result.model_copy(update={**named, "status": Status.failed, "error": reason, "latency_ms": None,
                                             "median_ms": None, "spread_ms": None, "samples_per_s": None,
                                             "details": details})
        target_scale = Correction.model_validate(fit["correction"]).factor(result.details.get("class_shares"),
                                                                          workload.mode)
        measured_here = fit["here"].get(workload.digest(), [])
        # The target's own measurement of this very workload is the answer (the mean of its logs if measured more
        # than once); only a workload it did not measure takes what other targets measured of it.
        residuals = [] if measured_here else fit["elsewhere"].get(workload.digest(), [])
        carried = (math.exp(sum(measured_here) / len(measured_here)) if measured_here
                   else transfer_factor(residuals))
        scale = target_scale * carried
        latency = (result.latency_ms or 0.0) * scale
        shares = band_model().calibration
        if measured_here:
            narrowed = shares.measured_here, "the target measured this workload"
        elif residuals:
            narrowed = shares.measured_elsewhere, f"calibrated, {len(residuals)} measurement(s) of it elsewhere"
        else:
            narrowed = shares.points, f"calibrated on {fit['points_used']} point(s)"
        return result.model_copy(update={
            "band": result.band.narrowed(*narrowed) if result.band is not None else None,
            **named,
            "latency_ms": latency,
            "median_ms": result.median_ms * scale if result.median_ms is not None else None,
            "spread_ms": result.spread_ms * scale if result.spread_ms is not None else None,
            "samples_per_s": workload.batch_size * 1000.0 / latency if latency else None,
            "details": {**details, "scale": scale, "target_scale": target_scale,
                        "measured_here": len(measured_here), "measured_elsewhere": len(residuals),
                        "points_used": fit["points_used"],
                        "base_points_ms": fit["base_points_ms"]},
        })

    def _failure(self, runner: Runner, workload: Workload, target: TargetSpec, calibration: CalibrationSet | None,
                 error: str) -> PredictionResult:
        try:
            version = self._identity(runner, self.base(runner, calibration), calibration).version
        except UnderstudyError:
            version = self.version
        return PredictionResult(workload_digest=workload.digest(), target_id=target.id, estimator=CALIBRATED_ESTIMATOR,
                                estimator_version=version, status=Status.failed, host_fingerprint=ANY_HOST,
                                error=error)
