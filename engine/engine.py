"""The prediction engine: a workload, targets and an estimator in; one PredictionResult per target out.

Used in-process by the CLI and by the service's worker. Targets whose plans ask for the same host setting share
one measurement; restrictions are applied and released by the bench. The calibrated estimator is run here too: its
base estimator predicts the workload and each calibration point, and a correction fitted to the points scales it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from understudy.calibration import CalibrationSet, Correction, FitPoint, fit_correction
from understudy.catalog import TargetSpec
from understudy.errors import NoGpu, NotCalibrated, UnderstudyError
from understudy.estimator_info import CALIBRATED_ESTIMATOR, calibrated_version, estimator_info
from understudy.keys import ANY_HOST
from understudy.results import HostInfo, HostSetting, Measurement, PredictionResult, Status
from understudy.settings import Settings, get_settings
from understudy.workload import Workload
from engine.estimators import DEFAULT_CPU_ESTIMATOR, DEFAULT_GPU_ESTIMATOR, get_estimator
from engine.estimators.base import Estimator
from engine.measurement_log import MeasurementLog
from engine.probe import load_nvml, probe_host
from engine.restrict import reset_clocks

Progress = Callable[[str], None]


def measuring_order(setting: HostSetting) -> tuple[bool, float]:
    """Green contexts first, from the fewest SMs up; the whole GPU (and MPS, a process of its own) after them.

    cudnn.benchmark keeps the algorithm it chose for a shape for the rest of the process, whatever the SMs it was
    chosen on. One chosen on more SMs can fail to run on fewer: on the H200, a step timed on the whole GPU and then
    under a 32-SM green context failed with CUDNN_STATUS_EXECUTION_FAILED, while 32 SMs, then 128, then the whole GPU
    ran (tests/engine/test_gpu.py)."""
    green = setting.sm_mechanism == "green-context"
    return (not green, float(setting.sm_count or 0) if green else 0.0)


def distinct_settings(plans: Iterable[HostSetting | None]) -> list[tuple[HostSetting, list[HostSetting]]]:
    """The distinct settings among `plans`, each with the plans it serves; one is profiled if any of its plans
    asks for a profile (a profiled measurement serves an unprofiled plan too)."""
    groups: dict[tuple[Any, ...], list[HostSetting]] = {}
    for plan in plans:
        if plan is not None:
            groups.setdefault(plan.model_copy(update={"profile": False}).key, []).append(plan)
    return [(members[0].model_copy(update={"profile": any(m.profile for m in members)}), members)
            for members in groups.values()]


class Engine:
    def __init__(self, settings: Settings | None = None, gpu_index: int = 0, nvml: Any | None = None,
                 host: HostInfo | None = None, log: MeasurementLog | None = None, replay_only: bool = False) -> None:
        """`log` shares and keeps measurements; with `replay_only` nothing is measured, everything comes from it."""
        self.settings = settings or get_settings()
        self.gpu_index = gpu_index
        self.log = log
        self.replay_only = replay_only
        if replay_only:
            if log is None:
                raise ValueError("replay needs a measurement log")
            host = host or log.only_host()
            self.nvml = None
        else:
            self.nvml = nvml if nvml is not None else load_nvml()
        self.host = host or probe_host(gpu_index, self.nvml)
        # Fitted calibrations by fit_key(): the correction and the base's predictions of the points. Fitting runs the base
        # on every point, so a fit is kept; the service's worker stores them with the calibration across jobs.
        self.fits: dict[str, dict[str, Any]] = {}
        if self.host.has_gpu and self.settings.allow_clock_lock and self.nvml is not None:
            # An earlier run may have died holding a lock.
            reset_clocks(self.nvml, self.nvml.nvmlDeviceGetHandleByIndex(gpu_index))

    def default_estimator(self) -> str:
        return DEFAULT_GPU_ESTIMATOR if self.host.has_gpu else DEFAULT_CPU_ESTIMATOR

    def estimator(self, name: str | None) -> Estimator:
        estimator = get_estimator(name or self.default_estimator(), self.settings)
        if estimator.needs_gpu and not self.host.has_gpu:
            raise NoGpu(f"estimator {estimator.name!r} times the workload on an NVIDIA GPU and this machine has "
                        f"none; use --estimator {DEFAULT_CPU_ESTIMATOR}")
        return estimator

    def host_key(self, estimator: Estimator) -> str:
        return self.host.fingerprint if estimator.needs_gpu else ANY_HOST

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None,
                calibrations: Mapping[str, CalibrationSet] | None = None) -> list[PredictionResult]:
        """One result per target. `calibrations` (by target id) is what the calibrated estimator fits; a target
        without one gets a failed result saying so."""
        estimator = self.estimator(estimator_name)
        if estimator.name == CALIBRATED_ESTIMATOR:
            return self._predict_calibrated(workload, targets, calibrations or {}, progress)
        plans: list[HostSetting | None] = [estimator.plan(workload, target, self.host) for target in targets]
        measurements = self.measure_plans(workload, plans, progress)
        results = []
        for target, plan in zip(targets, plans, strict=True):
            measurement = measurements.get(plan.key) if plan is not None else None
            results.append(self._result(workload, target, estimator, plan, measurement))
        return results

    # --- the calibrated estimator -----------------------------------------------------------------------------------

    def calibration_base(self, calibration: CalibrationSet | None) -> Estimator:
        """The estimator a calibration corrects: the one it names, else this machine's default."""
        name = (calibration.base_estimator if calibration is not None else None) or self.default_estimator()
        if name == CALIBRATED_ESTIMATOR:
            raise UnderstudyError("a calibration's base estimator cannot be the calibrated estimator itself")
        return self.estimator(name)

    def identity(self, estimator_name: str | None, target: TargetSpec,
                 calibrations: Mapping[str, CalibrationSet] | None = None) -> tuple[str, str, str]:
        """(estimator, version, host key) that a prediction for this target records: what its cache key is made of.
        For the calibrated estimator the version names the base and the target's calibration, and the host is the
        base's."""
        estimator = self.estimator(estimator_name)
        if estimator.name != CALIBRATED_ESTIMATOR:
            return estimator.name, estimator.version, self.host_key(estimator)
        calibration = (calibrations or {}).get(target.id)
        base = self.calibration_base(calibration)
        return estimator.name, self._calibrated_version(base, calibration), self.host_key(base)

    def fit_key(self, calibration: CalibrationSet, target: TargetSpec, base: Estimator) -> str:
        """What a fit depends on: the points, the target, the base estimator@version and the host it measured on."""
        return f"{calibration.digest()[:16]}/{target.digest()[:16]}/{base.name}@{base.version}/{self.host_key(base)}"

    def _calibrated_version(self, base: Estimator, calibration: CalibrationSet | None) -> str:
        return calibrated_version(base.name, base.version, calibration.digest() if calibration is not None else "none")

    def _predict_calibrated(self, workload: Workload, targets: list[TargetSpec],
                            calibrations: Mapping[str, CalibrationSet],
                            progress: Progress | None) -> list[PredictionResult]:
        """The base's prediction for each target times the correction fitted to that target's calibration points."""
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
                base = self.calibration_base(calibration)
            except UnderstudyError as exc:
                results[i] = self._calibrated_failure(workload, target, calibration, str(exc))
                continue
            by_base.setdefault(base.name, []).append(i)
        for name, members in by_base.items():
            base = self.estimator(name)
            group = [targets[i] for i in members]
            predicted = self.predict(workload, group, name, progress)
            fits = self._fit(base, [(target, calibrations[target.id]) for target, result in
                                    zip(group, predicted, strict=True) if result.status == Status.done], progress)
            for i, result in zip(members, predicted, strict=True):
                target = targets[i]
                calibration = calibrations[target.id]
                results[i] = self._calibrated(workload, calibration, base, result,
                                              fits.get(self.fit_key(calibration, target, base)))
        return [result for result in results if result is not None]

    def _fit(self, base: Estimator, pairs: list[tuple[TargetSpec, CalibrationSet]],
             progress: Progress | None) -> dict[str, dict[str, Any]]:
        """The fit of each (target, calibration), from self.fits or made now: the base predicts every point's workload
        (one Engine.predict per distinct workload, over the targets it calibrates; they share measurements), then
        fit_correction over (those predictions and their class shares, the measured times). A fit that fails carries an
        "error" and is not kept."""
        todo = [(target, calibration) for target, calibration in pairs
                if self.fit_key(calibration, target, base) not in self.fits]
        by_workload: dict[str, tuple[Workload, dict[str, TargetSpec]]] = {}
        for target, calibration in todo:
            for point in calibration.points:
                by_workload.setdefault(point.workload.digest(), (point.workload, {}))[1][target.id] = target
        predicted: dict[tuple[str, str], PredictionResult] = {}
        for digest, (point_workload, point_targets) in by_workload.items():
            for result in self.predict(point_workload, list(point_targets.values()), base.name, progress):
                predicted[(digest, result.target_id)] = result
        fits = {}
        for target, calibration in pairs:
            key = self.fit_key(calibration, target, base)
            if key in self.fits:
                fits[key] = self.fits[key]
                continue
            points = [predicted[(point.workload.digest(), target.id)] for point in calibration.points]
            usable = [(result.latency_ms, point.measured_ms) for result, point in zip(points, calibration.points,
                                                                                       strict=True)
                      if result.status == Status.done and result.latency_ms]
            if not usable:
                reasons = "; ".join(dict.fromkeys(f"{r.status.value}: {r.error}" for r in points))
                fits[key] = {"error": f"none of the {len(points)} calibration points of {target.id} could be "
                                      f"predicted by {base.name} ({reasons})"}
                continue
            correction = fit_correction([
                FitPoint(predicted_ms=result.latency_ms, measured_ms=point.measured_ms, mode=point.workload.mode,
                         shares=result.details.get("class_shares"))
                for result, point in zip(points, calibration.points, strict=True)
                if result.status == Status.done and result.latency_ms])
            fits[key] = self.fits[key] = {
                "correction": correction.model_dump(),
                "points_used": len(usable),
                "base_points_ms": [r.latency_ms if r.status == Status.done else None for r in points],
            }
        return fits

    def _calibrated(self, workload: Workload, calibration: CalibrationSet, base: Estimator, result: PredictionResult,
                    fit: dict[str, Any] | None) -> PredictionResult:
        details: dict[str, Any] = {
            "base_estimator": base.name, "base_version": base.version, "calibration": calibration.digest(),
            "points": len(calibration.points), "base_latency_ms": result.latency_ms, "base_details": result.details,
        }
        named = {"estimator": CALIBRATED_ESTIMATOR, "estimator_version": self._calibrated_version(base, calibration)}
        if result.status != Status.done:
            return result.model_copy(update={**named, "details": details})
        if fit is None or "error" in fit:
            reason = fit["error"] if fit else "the calibration was not fitted"
            return result.model_copy(update={**named, "status": Status.failed, "error": reason, "latency_ms": None,
                                             "median_ms": None, "spread_ms": None, "samples_per_s": None,
                                             "details": details})
        scale = Correction.model_validate(fit["correction"]).factor(result.details.get("class_shares"), workload.mode)
        latency = (result.latency_ms or 0.0) * scale
        return result.model_copy(update={
            **named,
            "latency_ms": latency,
            "median_ms": result.median_ms * scale if result.median_ms is not None else None,
            "spread_ms": result.spread_ms * scale if result.spread_ms is not None else None,
            "samples_per_s": workload.batch_size * 1000.0 / latency if latency else None,
            "details": {**details, "scale": scale, "points_used": fit["points_used"],
                        "base_points_ms": fit["base_points_ms"]},
        })

    def _calibrated_failure(self, workload: Workload, target: TargetSpec, calibration: CalibrationSet | None,
                            error: str) -> PredictionResult:
        try:
            version = self._calibrated_version(self.calibration_base(calibration), calibration)
        except UnderstudyError:
            version = estimator_info(CALIBRATED_ESTIMATOR).version
        return PredictionResult(workload_digest=workload.digest(), target_id=target.id, estimator=CALIBRATED_ESTIMATOR,
                                estimator_version=version, status=Status.failed, host_fingerprint=ANY_HOST,
                                error=error)

    def measure_plans(self, workload: Workload, plans: list[HostSetting | None],
                      progress: Progress | None = None) -> dict[tuple[Any, ...], Measurement]:
        """One measurement per distinct setting (profiled if any plan of that setting asks for a profile)."""
        measurements: dict[tuple[Any, ...], Measurement] = {}
        todo: list[tuple[HostSetting, list[HostSetting]]] = []
        for setting, members in distinct_settings(plans):
            logged = self.log.get(self.host, workload, setting) if self.log else None
            if logged is None and self.replay_only:
                logged = Measurement(status="failed", error=f"not in the measurement log: {setting.describe()}")
            if logged is not None:
                measurements.update({member.key: logged for member in members})
            else:
                todo.append((setting, members))
        if not todo:
            return measurements
        from engine.bench import Bench

        todo.sort(key=lambda item: measuring_order(item[0]))
        with Bench(workload, self.host, self.settings, self.gpu_index, self.nvml) as bench:
            for setting, members in todo:
                if progress:
                    progress(f"measuring {workload.label} at {setting.describe()}")
                measured = bench.measure(setting)
                if self.log is not None:
                    self.log.put(self.host, workload, setting, measured)
                measurements.update({member.key: measured for member in members})
        return measurements

    def _result(self, workload: Workload, target: TargetSpec, estimator: Estimator, plan: HostSetting | None,
                measurement: Measurement | None) -> PredictionResult:
        try:
            estimate = estimator.estimate(workload, target, self.host, measurement)
        except Exception as exc:  # noqa: BLE001 - one target's failure is that target's result
            return self._base(workload, target, estimator, plan, measurement, Status.failed, error=str(exc))
        status = Status(estimate.status)
        latency = estimate.latency_ms if status == Status.done else None
        details = dict(estimate.details)
        if measurement is not None:
            details["measurement"] = measurement.model_dump(exclude_none=True)
        return self._base(
            workload, target, estimator, plan, measurement, status,
            latency_ms=latency,
            median_ms=estimate.median_ms if latency else None,
            spread_ms=estimate.spread_ms if latency else None,
            samples_per_s=workload.batch_size * 1000.0 / latency if latency else None,
            error=estimate.error,
            details=details,
        )

    def _base(self, workload: Workload, target: TargetSpec, estimator: Estimator, plan: HostSetting | None,
              measurement: Measurement | None, status: Status, **fields: Any) -> PredictionResult:
        return PredictionResult(
            workload_digest=workload.digest(),
            target_id=target.id,
            estimator=estimator.name,
            estimator_version=estimator.version,
            status=status,
            host_setting=plan,
            timing_mode=measurement.timing_mode if measurement else "none",
            host_fingerprint=self.host_key(estimator),
            host_name=self.host.gpu_name if estimator.needs_gpu else None,
            **fields,
        )

