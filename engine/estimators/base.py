"""The estimator interface: plan a host setting per target, then turn the host's measurement into a prediction.

An estimator that predicts through other estimators (the calibrated one) overrides `predict` and `identity`, and
reaches the engine through the `Runner` protocol, which is all it may know of it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec, catalog
from understudy.errors import UnderstudyError
from understudy.keys import CacheIdentity, cache_identity
from understudy.results import HostInfo, HostSetting, Measurement, MemoryVerdict, PredictionResult
from understudy.workload import Workload
from engine.count_lookup import counts_for
from engine.estimators.memory import predict_memory, verdict

Progress = Callable[[str], None]
# A target's calibration by target id: what the calibrated estimator fits; the others ignore it.
Calibrations = Mapping[str, CalibrationSet]


@dataclass
class Estimate:
    status: str = "done"
    latency_ms: float | None = None
    median_ms: float | None = None
    spread_ms: float | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    memory: MemoryVerdict | None = None


class Estimator(ABC):
    name: ClassVar[str]
    version: str  # a class's own, or set per instance where settings change it (spec)
    needs_gpu: ClassVar[bool] = True

    @abstractmethod
    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        """The host setting to measure under for this target; None when no measurement is needed."""

    @abstractmethod
    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        """The predicted step time on the target."""

    def identity(self, runner: Runner, target: TargetSpec, calibrations: Calibrations) -> CacheIdentity:
        """What a prediction of this estimator for the target records, and its cache key holds."""
        return cache_identity(self.name, self.version, runner.host.fingerprint if self.needs_gpu else None)

    def predict(self, runner: Runner, workload: Workload, targets: list[TargetSpec], progress: Progress | None,
                calibrations: Calibrations) -> list[PredictionResult]:
        """One result per target: each target's plan measured on the host (once per distinct setting), estimated."""
        return runner.predict_plans(self, workload, targets, progress)


class Runner(Protocol):
    """The engine, as an estimator sees it."""

    host: HostInfo
    # Fits an estimator keeps between predictions (the calibrated one's, by fit key); the worker stores them.
    fits: dict[str, dict[str, Any]]

    def estimator(self, name: str | None) -> Estimator: ...

    def default_estimator(self) -> str: ...

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None,
                calibrations: Calibrations | None = None) -> list[PredictionResult]: ...

    def predict_plans(self, estimator: Estimator, workload: Workload, targets: list[TargetSpec],
                      progress: Progress | None) -> list[PredictionResult]: ...


def host_spec(host: HostInfo) -> TargetSpec:
    """The host GPU's own catalog entry, which the ratio-based estimators need."""
    found = catalog().find_by_device_name(host.gpu_name or "", host.memory_gb)
    if found is None:
        raise UnderstudyError(
            f"the host GPU {host.gpu_name!r} is not in the catalog; add it to understudy/data/gpus.csv"
        )
    return found


def scaled(measurement: Measurement, factor: float, details: dict[str, Any]) -> Estimate:
    """A measurement's min/median/spread, as the host GPU's share of them (Measurement.device_share), multiplied by
    one factor."""
    factor_of_timed = factor * measurement.device_share
    return Estimate(
        latency_ms=(measurement.min_ms or 0.0) * factor_of_timed,
        median_ms=(measurement.median_ms or 0.0) * factor_of_timed,
        spread_ms=(measurement.spread_ms or 0.0) * factor_of_timed,
        details={"scale": factor, **details},
    )


def memory_verdict(workload: Workload, target: TargetSpec) -> MemoryVerdict:
    """Whether the workload fits the target's memory, by its predicted peak (engine.estimators.memory).

    Every estimator asks the same prediction: a host's own peak is no guide to a smaller card's, since on a host with
    far more memory cuDNN's autotuner picks algorithms with workspaces a smaller card trades for leaner ones
    (regnetz_d32 inference at batch 1024 peaked at 52 GB on the H200 and ran on 24 GB cards)."""
    return verdict(predict_memory(counts_for(workload), workload), workload, target)


def out_of_memory(workload: Workload, target: TargetSpec) -> Estimate | None:
    """An OOM result when even the low end of the workload's predicted peak memory exceeds the target's, else
    None."""
    memory = memory_verdict(workload, target)
    if memory.verdict != "oom":
        return None
    return Estimate(status="oom", error=f"needs about {memory.peak_gb:.1f} GB (at least {memory.low_gb:.1f}); "
                    f"{target.name} has {target.memory_size_gb:g} GB", memory=memory)


def unusable(measurement: Measurement | None, target: TargetSpec, workload: Workload) -> Estimate | None:
    """An OOM or failure result when the measurement cannot stand for the target, else None."""
    if measurement is None:
        return Estimate(status="failed", error="no measurement was made")
    if measurement.status != "done":
        return Estimate(status=measurement.status, error=measurement.error)
    return out_of_memory(workload, target)
