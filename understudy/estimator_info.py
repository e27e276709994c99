"""What the API needs to know about the estimators, without importing them (they import torch).

The API validates estimator names, picks a queue and computes cache keys from this table; a worker advertises the
versions it actually runs in its heartbeat, and the API prefers those. tests/service/test_boundaries.py keeps this
table equal to engine.estimators.ESTIMATORS.
"""

from __future__ import annotations

from dataclasses import dataclass

from understudy.errors import NoGpu, UnknownEstimator
from understudy.settings import Settings
from understudy.workload import sha256_of

DEFAULT_GPU_ESTIMATOR = "hostaware"
DEFAULT_CPU_ESTIMATOR = "analytic"
# The estimator whose answer a prediction shows while it waits for a GPU measurement: it needs no GPU, so any worker
# gives it in seconds (app.crud, worker.tasks.estimate_predictions, cli.local.LocalPredictor.estimates).
ESTIMATE_ESTIMATOR = DEFAULT_CPU_ESTIMATOR
# Not an estimator of its own: a base estimator's prediction times a correction fitted to a target's calibration.
CALIBRATED_ESTIMATOR = "calibrated"


@dataclass(frozen=True)
class EstimatorInfo:
    name: str
    version: str
    needs_gpu: bool
    summary: str


ESTIMATORS: dict[str, EstimatorInfo] = {
    info.name: info
    for info in (
        EstimatorInfo("spec", "3", True, "the target's SM count and boost clock applied to the host GPU, timed"),
        EstimatorInfo("flops", "3", True, "the host's measured time scaled by the ratio of peak throughputs"),
        EstimatorInfo("analytic", "17", False, "a roofline over the traced operators; needs no GPU"),
        EstimatorInfo("hostaware", "18", True, "the host's measured time split by kernel class, each class rescaled "
                      "by the roofline's target/host time ratio, and blended with the roofline"),
        # Runs where its base runs (the API places it as its base; the engine checks the base), so no GPU of its own.
        EstimatorInfo("calibrated", "4", False, "a base estimator scaled by a correction fitted to a few measured "
                      "latencies of the target (POST /v1/targets/{id}/calibrations)"),
    )
}


def estimator_info(name: str) -> EstimatorInfo:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise UnknownEstimator(f"unknown estimator {name!r}; choose from {', '.join(ESTIMATORS)}") from None


def default_estimator(has_gpu: bool) -> str:
    """What a prediction uses when no estimator is named: the host-aware one on a GPU, the roofline without."""
    return DEFAULT_GPU_ESTIMATOR if has_gpu else DEFAULT_CPU_ESTIMATOR


def no_gpu(name: str) -> NoGpu:
    """The error for a GPU estimator asked of a machine without a GPU, saying what to use instead."""
    return NoGpu(f"estimator {name!r} times the workload on an NVIDIA GPU and this machine has none; use "
                 f"--estimator {DEFAULT_CPU_ESTIMATOR}")


def runnable(name: str, has_gpu: bool) -> EstimatorInfo:
    """The estimator, if a machine with (or without) a GPU can run it."""
    info = estimator_info(name)
    if info.needs_gpu and not has_gpu:
        raise no_gpu(name)
    return info


def estimator_version(name: str, settings: Settings) -> str:
    """The version a worker with these settings records (spec's depends on how SMs and clocks are applied)."""
    info = estimator_info(name)
    if name == "spec":
        # How the SM share and clock are applied changes the number, so it is part of the version (and cache key),
        # short enough for the ledger's 20-character column: e.g. "1+gc+emu", "1+mps+lock".
        mechanism = {"green-context": "gc"}.get(settings.sm_mechanism, settings.sm_mechanism)
        clock = "lock" if settings.allow_clock_lock else "emu"
        return f"{info.version}+{mechanism}+{clock}"
    return info.version


def calibrated_version(base: str, base_version: str, calibration_digest: str) -> str:
    """The version a calibrated prediction records, and so its cache key holds: the calibrated estimator's own, then
    a tag of the base estimator@version and the calibration's points. A new calibration or another base is a new
    cache entry. Short, to fit the ledger's estimator_version column; the details name the base and the digest."""
    tag = sha256_of({"base": f"{base}@{base_version}", "calibration": calibration_digest})[:12]
    return f"{ESTIMATORS[CALIBRATED_ESTIMATOR].version}+{tag}"
