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
from understudy.results import HostInfo, HostSetting, Measurement, PredictionResult
from understudy.workload import Workload

Progress = Callable[[str], None]
# A target's calibration by target id: what the calibrated estimator fits; the others ignore it.
Calibrations = Mapping[str, CalibrationSet]

# Memory the CUDA context and libraries take beside the workload's own allocations.
CONTEXT_OVERHEAD_GB = 0.6
# Share of the host's peak allocation that a smaller card must hold too. The rest is workspace and graph-pool slack:
# on a host with far more memory, cuDNN's autotuner picks algorithms with large workspaces that a smaller card
# trades for leaner ones (regnetz_d32 inference at batch 1024 peaked at 52 GB on the H200 and ran on 24 GB cards).
# Chosen so that no ground-truth row measured on a 24 GB card is called OOM from the H200.
ESSENTIAL_SHARE = 0.45


@dataclass
class Estimate:
    status: str = "done"
    latency_ms: float | None = None
    median_ms: float | None = None
    spread_ms: float | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


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
    """A measurement's min/median/spread multiplied by one factor."""
    return Estimate(
        latency_ms=(measurement.min_ms or 0.0) * factor,
        median_ms=(measurement.median_ms or 0.0) * factor,
        spread_ms=(measurement.spread_ms or 0.0) * factor,
        details={"scale": factor, **details},
    )


def unusable(measurement: Measurement | None, target: TargetSpec) -> Estimate | None:
    """An OOM or failure result when the measurement cannot stand for the target, else None."""
    if measurement is None:
        return Estimate(status="failed", error="no measurement was made")
    if measurement.status != "done":
        return Estimate(status=measurement.status, error=measurement.error)
    if measurement.peak_memory_gb is not None:
        needed = measurement.peak_memory_gb * ESSENTIAL_SHARE + CONTEXT_OVERHEAD_GB
        if needed > target.memory_size_gb:
            return Estimate(status="oom", error=f"needs about {needed:.1f} GB; {target.name} has "
                            f"{target.memory_size_gb:g} GB", details={"peak_memory_gb": measurement.peak_memory_gb})
    return None
