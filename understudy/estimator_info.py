"""What the API needs to know about the estimators, without importing them (they import torch).

The API validates estimator names, picks a queue and computes cache keys from this table; a worker advertises the
versions it actually runs in its heartbeat, and the API prefers those. tests/service/test_estimator_info.py keeps this
table equal to worker.estimators.ESTIMATORS.
"""

from __future__ import annotations

from dataclasses import dataclass

from understudy.errors import UnknownEstimator
from understudy.settings import Settings

DEFAULT_GPU_ESTIMATOR = "hostaware"
DEFAULT_CPU_ESTIMATOR = "analytic"


@dataclass(frozen=True)
class EstimatorInfo:
    name: str
    version: str
    needs_gpu: bool
    summary: str


ESTIMATORS: dict[str, EstimatorInfo] = {
    info.name: info
    for info in (
        EstimatorInfo("spec", "1", True, "the target's SM count and boost clock applied to the host GPU, timed"),
        EstimatorInfo("flops", "1", True, "the host's measured time scaled by the ratio of peak throughputs"),
        EstimatorInfo("analytic", "2", False, "a roofline over the traced operators; needs no GPU"),
        EstimatorInfo("hostaware", "2", True, "the host's measured time split by kernel class, rescaled per class and blended with the roofline"),
    )
}


def estimator_info(name: str) -> EstimatorInfo:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise UnknownEstimator(f"unknown estimator {name!r}; choose from {', '.join(ESTIMATORS)}") from None


def estimator_version(name: str, settings: Settings) -> str:
    """The version a worker with these settings records (spec's depends on how SMs and clocks are applied)."""
    info = estimator_info(name)
    if name == "spec":
        clock = "lock" if settings.allow_clock_lock else "emulated"
        return f"{info.version}+{settings.sm_mechanism}+{clock}"
    return info.version
