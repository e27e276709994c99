"""The prediction engine: a workload, targets and an estimator in; one PredictionResult per target out.

Used in-process by the CLI and by the service's worker. Targets whose plans ask for the same host setting share
one measurement; restrictions are applied and released by the bench.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from understudy.catalog import TargetSpec
from understudy.errors import NoGpu
from understudy.keys import ANY_HOST
from understudy.results import HostInfo, HostSetting, Measurement, PredictionResult, Status
from understudy.settings import Settings, get_settings
from understudy.workload import Workload
from worker.estimators import DEFAULT_CPU_ESTIMATOR, DEFAULT_GPU_ESTIMATOR, get_estimator
from worker.estimators.base import Estimator
from worker.measurement_log import MeasurementLog
from worker.probe import load_nvml, probe_host
from worker.restrict import reset_clocks

Progress = Callable[[str], None]


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
                progress: Progress | None = None) -> list[PredictionResult]:
        estimator = self.estimator(estimator_name)
        plans: list[HostSetting | None] = [estimator.plan(workload, target, self.host) for target in targets]
        measurements = self.measure_plans(workload, plans, progress)
        results = []
        for target, plan in zip(targets, plans, strict=True):
            measurement = measurements.get(plan.key) if plan is not None else None
            results.append(self._result(workload, target, estimator, plan, measurement))
        return results

    def measure_plans(self, workload: Workload, plans: list[HostSetting | None],
                      progress: Progress | None = None) -> dict[tuple[Any, ...], Measurement]:
        """One measurement per distinct setting (profiled if any plan of that setting asks for a profile)."""
        groups: dict[tuple[Any, ...], list[HostSetting]] = {}
        for plan in plans:
            if plan is not None:
                groups.setdefault(plan.model_copy(update={"profile": False}).key, []).append(plan)
        measurements: dict[tuple[Any, ...], Measurement] = {}
        todo: list[tuple[HostSetting, list[HostSetting]]] = []
        for members in groups.values():
            setting = members[0].model_copy(update={"profile": any(m.profile for m in members)})
            logged = self.log.get(self.host, workload, setting) if self.log else None
            if logged is None and self.replay_only:
                logged = Measurement(status="failed", error=f"not in the measurement log: {describe(setting)}")
            if logged is not None:
                measurements.update({member.key: logged for member in members})
            else:
                todo.append((setting, members))
        if not todo:
            return measurements
        from worker.bench import Bench

        with Bench(workload, self.host, self.settings, self.gpu_index, self.nvml) as bench:
            for setting, members in todo:
                if progress:
                    progress(f"measuring {workload.label} at {describe(setting)}")
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


def describe(setting: HostSetting | None) -> str:
    """A short human description of a host setting: '28 SMs (green-context), 1777 MHz (emulated)'."""
    if setting is None:
        return "no GPU (counted)"
    sms = f"{setting.sm_count} SMs ({setting.sm_mechanism})" if setting.sm_count else "all SMs"
    clock = f", {setting.clock_mhz:.0f} MHz ({setting.clock_mode})" if setting.clock_mhz else ""
    return sms + clock
