"""The prediction engine: a workload, targets and an estimator in; one PredictionResult per target out.

Used in-process by the CLI and by the service's worker. Targets whose plans ask for the same host setting share
one measurement; restrictions are applied and released by the bench. Every estimator
predicts through `Estimator.predict`: most take the default (plan, measure, estimate), the calibrated one predicts
through its base.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from understudy.bands import ErrorBand, band_model
from understudy.catalog import TargetSpec
from understudy.keys import CacheIdentity
from understudy.results import HostInfo, HostSetting, Measurement, PredictionResult, Status
from understudy.settings import Settings, get_settings
from understudy.workload import Workload
from understudy.estimator_info import default_estimator, no_gpu
from engine.count_lookup import counts_for
from engine.estimators import get_estimator
from engine.estimators.base import Calibrations, Estimate, Estimator, Progress, memory_verdict
from engine.measurement_log import MeasurementLog
from engine.probe import load_nvml, probe_host
from engine.restrict import reset_clocks


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


def prediction_band(estimator: str, workload: Workload, target: TargetSpec, estimate: Estimate) -> ErrorBand | None:
    """The error band of a done estimate (understudy.bands), from its share in plain-lane convolutions where it has
    one and whether the workload is compiled."""
    model = band_model()
    return model.band(model.features(estimator, workload.mode, target, estimate.details.get("convolution_share"),
                                     workload.compile))


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
        # Fits the estimators keep between predictions (engine.estimators.calibrated's: the correction and the base's
        # predictions of the points, by its fit_key); the service's worker stores them with the calibration across jobs.
        self.fits: dict[str, dict[str, Any]] = {}
        if self.host.has_gpu and self.settings.allow_clock_lock and self.nvml is not None:
            # An earlier run may have died holding a lock.
            reset_clocks(self.nvml, self.nvml.nvmlDeviceGetHandleByIndex(gpu_index))

    def default_estimator(self) -> str:
        return default_estimator(self.host.has_gpu)

    def estimator(self, name: str | None) -> Estimator:
        estimator = get_estimator(name or self.default_estimator(), self.settings)
        if estimator.needs_gpu and not self.host.has_gpu:
            raise no_gpu(estimator.name)
        return estimator

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None,
                calibrations: Calibrations | None = None) -> list[PredictionResult]:
        """One result per target. `calibrations` (by target id) is what the calibrated estimator fits."""
        return self.estimator(estimator_name).predict(self, workload, targets, progress, calibrations or {})

    def predict_plans(self, estimator: Estimator, workload: Workload, targets: list[TargetSpec],
                      progress: Progress | None = None) -> list[PredictionResult]:
        """Plan each target, measure each distinct setting once, estimate each target from its measurement."""
        plans: list[HostSetting | None] = [estimator.plan(workload, target, self.host) for target in targets]
        measurements = self.measure_plans(workload, plans, progress)
        results = []
        for target, plan in zip(targets, plans, strict=True):
            measurement = measurements.get(plan.key) if plan is not None else None
            results.append(self._result(workload, target, estimator, plan, measurement))
        return results

    def identity(self, estimator_name: str | None, target: TargetSpec,
                 calibrations: Calibrations | None = None) -> CacheIdentity:
        """What a prediction for this target records, and so what its cache key is made of."""
        return self.estimator(estimator_name).identity(self, target, calibrations or {})

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
        try:
            memory = estimate.memory or (memory_verdict(workload, target) if status != Status.failed else None)
        except Exception:  # noqa: BLE001 - a model the trace cannot count has no verdict; its time stands
            memory = None
        if latency is not None and "kernels" not in details and (kernels := self._kernels(workload)) is not None:
            details["kernels"] = kernels
        return self._base(
            workload, target, estimator, plan, measurement, status,
            latency_ms=latency,
            median_ms=estimate.median_ms if latency else None,
            spread_ms=estimate.spread_ms if latency else None,
            samples_per_s=workload.batch_size * 1000.0 / latency if latency else None,
            error=estimate.error,
            details=details,
            band=prediction_band(estimator.name, workload, target, estimate) if latency else None,
            memory=memory,
        )

    @staticmethod
    def _kernels(workload: Workload) -> int | None:
        """The step's kernel launches as the meta-device trace counts them (cached): what an eager step, as an FL
        client runs it, costs the CPU beside its GPU time (understudy/steps.py). None for a model it cannot count."""
        try:
            return len(counts_for(workload).ops)
        except Exception:  # noqa: BLE001 - a model the trace cannot count: its GPU time stands alone
            return None

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
            host_fingerprint=estimator.identity(self, target, {}).host_key,
            host_name=self.host.gpu_name if estimator.needs_gpu else None,
            **fields,
        )

