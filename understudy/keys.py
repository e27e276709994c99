"""Cache keys: one per (workload, target, estimator@version, host), unique in the store, and what they are made of.

Torch-free, so that `understudy predict` can look its answers up before it imports anything heavy; the engine asks
the same function (engine.engine.Engine.identity), so a key computed here is the key a fresh prediction is stored
under.
"""

from __future__ import annotations

from collections.abc import Mapping

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec
from understudy.errors import UnderstudyError
from understudy.estimator_info import (
    CALIBRATED_ESTIMATOR,
    EstimatorInfo,
    calibrated_version,
    default_estimator,
    estimator_version,
    runnable,
)
from understudy.results import HostInfo
from understudy.settings import Settings
from understudy.workload import Workload, sha256_of

# Estimators that never touch a GPU give the same answer on every host.
ANY_HOST = "any"


def cache_key(workload: Workload, target: TargetSpec, estimator: str, version: str, host_key: str) -> str:
    return sha256_of(
        {
            "workload": workload.canonical(),
            "target": target.digest(),
            "estimator": f"{estimator}@{version}",
            "host": host_key,
        }
    )


def host_key(estimator: EstimatorInfo, host: HostInfo) -> str:
    """The host part of a cache key: the GPU's fingerprint for estimators that time on it, else any host."""
    return host.fingerprint if estimator.needs_gpu else ANY_HOST


def calibration_base(calibration: CalibrationSet | None, host: HostInfo) -> EstimatorInfo:
    """The estimator a calibration corrects: the one it names, else this host's default."""
    name = (calibration.base_estimator if calibration is not None else None) or default_estimator(host.has_gpu)
    if name == CALIBRATED_ESTIMATOR:
        raise UnderstudyError("a calibration's base estimator cannot be the calibrated estimator itself")
    return runnable(name, host.has_gpu)


def identity(estimator: str | None, target: TargetSpec, host: HostInfo, settings: Settings,
             calibrations: Mapping[str, CalibrationSet] | None = None) -> tuple[str, str, str]:
    """(estimator, version, host key) that a prediction for this target on this host records: what its cache key
    is made of. For the calibrated estimator the version names the base and the target's calibration, and the host
    is the base's."""
    info = runnable(estimator or default_estimator(host.has_gpu), host.has_gpu)
    if info.name != CALIBRATED_ESTIMATOR:
        return info.name, estimator_version(info.name, settings), host_key(info, host)
    calibration = (calibrations or {}).get(target.id)
    base = calibration_base(calibration, host)
    digest = calibration.digest() if calibration is not None else "none"
    version = calibrated_version(base.name, estimator_version(base.name, settings), digest)
    return info.name, version, host_key(base, host)
