"""How far from a prediction the measured time may fall: the error band every answer carries.

A prediction's error, e = log(measured / predicted), is taken as center + scale x z, where z follows one
standardized distribution per estimator (its quantiles are shipped) and the center and the scale depend only on what
is known before anything is measured on the target:

- the estimator, and the mode (a training step is priced less exactly than a forward pass);
- whether the target's architecture was seen in development (a chip family no ground truth covers: Volta, Turing,
  Blackwell) and whether it runs power-limited (its sustained clock well below its boost clock, as every part
  whose power budget per SM is below its chip's best-supplied one: an A10, a laptop part, a Max-Q card);
- the convolution share: the share of the target roofline's step in plain-lane convolutions, depthwise and thin
  grouped ones (engine.estimators.roofline.PLAIN_LANE_CONVOLUTIONS): the development rows' errors grow with it, the
  more of a step in those kernels the less surely it is carried from one card to another. An fp32 step's GEMMs run
  on the same FP32 lanes but are priced as surely as tensor-core work, so they do not count.

log(scale) is linear in those (a step whose convolution share is not known counts as a quarter in those kernels,
more than nine development steps in ten spend less there: not knowing a step's split must not narrow its band); the
center is linear in the same terms, and the shipped model centres every band on the prediction (0: a development
GPU's own bias is no guide to the next GPU's), with z's quantiles symmetric about 0 for the estimators that choose
constants (the sign of a development GPU's errors is its bias too). benchmarks/accuracy/bands.py fits the model to
the estimators' leave-one-GPU-out residuals (each development GPU predicted with constants chosen without it) and
checks the band on GPUs it was not fitted on; it writes understudy/data/error_bands.json, which this module reads. A
band at coverage c is [predicted x exp(center + scale x z((1-c)/2)), predicted x exp(center + scale x z((1+c)/2))]:
the measured time falls inside it for about c of the workloads. A compiled workload's (torch.compile) scale is
multiplied by its estimator's compiled_widening: compiled ground truth is one GPU's, so that is fitted on its rows
rather than left out GPU by GPU.

A calibrated prediction (a correction fitted to the target's own measured times) narrows its base's band by the
shares the same benchmark measured on calibrated held-out rows. A memory verdict's margin (MemoryMargin) comes with
the model: benchmarks/accuracy/memory.py chooses it on timm's OOM back-off rows.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from understudy.catalog import TargetSpec

DEFAULT_COVERAGE = 0.8
# The coverages a band can be asked at: beyond them the shipped quantiles rest on a handful of rows.
MIN_COVERAGE, MAX_COVERAGE = 0.5, 0.95

Term = Literal["intercept", "train", "convolution_share", "unseen_architecture", "power_limited"]
# The convolution share a step whose split by kernel kind is unknown counts as having.
UNKNOWN_CONVOLUTION_SHARE = 0.25


class BandFeatures(BaseModel):
    """What a band is conditioned on, all known before measuring on the target."""

    model_config = ConfigDict(frozen=True)

    estimator: str
    mode: Literal["train", "infer"]
    architecture: str = "unknown"
    power_limited: bool = False
    convolution_share: float | None = Field(default=None, ge=0, le=1,
                                            description="the share of the predicted step in plain-lane (depthwise "
                                                        "and grouped) convolutions")
    compiled: bool = Field(default=False, description="the workload is the model compiled with torch.compile")


class ErrorBand(BaseModel):
    """One prediction's band, in logs of measured / predicted; `interval` gives it at a coverage."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(description="the band model's version")
    center: float
    scale: float = Field(gt=0)
    z: tuple[float, ...] = Field(description="quantiles of the standardized error at QUANTILE_LEVELS")
    basis: str = Field(description="what the band was conditioned on, in words")

    def multipliers(self, coverage: float = DEFAULT_COVERAGE) -> tuple[float, float]:
        """(low, high) multipliers of the predicted value that hold the measured one at `coverage`."""
        check_coverage(coverage)
        tail = (1.0 - coverage) / 2.0
        low, high = _quantile(self.z, tail), _quantile(self.z, 1.0 - tail)
        return math.exp(self.center + self.scale * low), math.exp(self.center + self.scale * high)

    def interval(self, value: float, coverage: float = DEFAULT_COVERAGE) -> tuple[float, float]:
        low, high = self.multipliers(coverage)
        return value * low, value * high

    def narrowed(self, share: float, why: str) -> ErrorBand:
        """The same band with its scale times `share` (a calibration's), its center pulled in as much."""
        return self.model_copy(update={"center": self.center * share, "scale": self.scale * share,
                                       "basis": f"{self.basis}; {why}"})


# The probabilities the shipped standardized quantiles are given at: every 2.5 % from 2.5 to 97.5, with the median.
QUANTILE_LEVELS: tuple[float, ...] = tuple(round(0.025 * i, 3) for i in range(1, 40))


def check_coverage(coverage: float) -> None:
    if not MIN_COVERAGE <= coverage <= MAX_COVERAGE:
        raise ValueError(f"coverage must be from {MIN_COVERAGE} to {MAX_COVERAGE}, got {coverage}")


def _quantile(z: tuple[float, ...], p: float) -> float:
    """The standardized quantile at probability p, linear between the shipped levels."""
    levels = QUANTILE_LEVELS
    if p <= levels[0]:
        return z[0]
    if p >= levels[-1]:
        return z[-1]
    i = min(int((p - levels[0]) / 0.025), len(levels) - 2)
    weight = (p - levels[i]) / (levels[i + 1] - levels[i])
    return z[i] + weight * (z[i + 1] - z[i])


class EstimatorBand(BaseModel):
    """One estimator's band: the terms of its center and of log(scale), and its standardized quantiles."""

    center: dict[Term, float]
    log_scale: dict[Term, float]
    z: tuple[float, ...]
    rows: int = Field(description="the residuals it was fitted to")


class MemoryMargin(BaseModel):
    """How far a step's real peak may lie from the predicted one, per mode: (low, high) multipliers."""

    infer: tuple[float, float]
    train: tuple[float, float]


class CalibrationShares(BaseModel):
    """How much a calibration narrows its base's band: by its own points, by points of the same workload measured on
    other targets, and where the target measured this very workload."""

    points: float
    measured_elsewhere: float
    measured_here: float


class BandModel(BaseModel):
    """The shipped band model (understudy/data/error_bands.json)."""

    version: str
    seen_architectures: tuple[str, ...]
    power_limited_below: float = Field(description="sustained / boost clock under which a target is power-limited")
    estimators: dict[str, EstimatorBand]
    # What a compiled workload's band is widened by, per estimator: compiled ground truth comes from one GPU only,
    # so it cannot be a term fitted leave-one-GPU-out; it is the factor that makes the band hold its coverage of the
    # compiled rows there are (never below 1: a compiled step is not priced more surely than an eager one).
    compiled_widening: dict[str, float] = Field(default_factory=dict)
    memory: MemoryMargin
    calibration: CalibrationShares

    def band(self, features: BandFeatures) -> ErrorBand | None:
        """The band of a prediction with these features; None for an estimator the model has no residuals of."""
        fitted = self.estimators.get(features.estimator)
        if fitted is None:
            return None
        values = self.term_values(features)
        center = sum(weight * values[term] for term, weight in fitted.center.items())
        scale = math.exp(sum(weight * values[term] for term, weight in fitted.log_scale.items()))
        if features.compiled:
            scale *= self.compiled_widening.get(features.estimator, 1.0)
        return ErrorBand(model=self.version, center=center, scale=scale, z=fitted.z, basis=_basis(features, self))

    def term_values(self, features: BandFeatures) -> dict[Term, float]:
        """Each term's value for a prediction with these features (what the center and log(scale) weigh)."""
        return {
            "intercept": 1.0,
            "train": float(features.mode == "train"),
            "convolution_share": (features.convolution_share if features.convolution_share is not None
                                  else UNKNOWN_CONVOLUTION_SHARE),
            "unseen_architecture": float(features.architecture not in self.seen_architectures),
            "power_limited": float(features.power_limited),
        }

    def power_limited(self, target: TargetSpec) -> bool:
        """Whether the target holds a clock well below its boost clock under load (its power limit binds)."""
        return target.sustained_clock() < self.power_limited_below * target.boost_clock_mhz

    def features(self, estimator: str, mode: Literal["train", "infer"], target: TargetSpec,
                 convolution_share: float | None, compiled: bool = False) -> BandFeatures:
        return BandFeatures(estimator=estimator, mode=mode, architecture=target.architecture,
                            power_limited=self.power_limited(target), convolution_share=convolution_share,
                            compiled=compiled)

    def memory_band(self, peak_gb: float, mode: Literal["train", "infer"]) -> tuple[float, float]:
        """(low, high) GiB a step predicted to peak at `peak_gb` may really take."""
        low, high = getattr(self.memory, mode)
        return peak_gb * low, peak_gb * high


def _basis(features: BandFeatures, model: BandModel) -> str:
    seen = "seen" if features.architecture in model.seen_architectures else "not seen"
    parts = [f"{features.estimator} {features.mode}", f"{features.architecture} ({seen} in development)",
             "power-limited" if features.power_limited else "at full power"]
    if features.convolution_share is not None:
        parts.append(f"{features.convolution_share:.0%} in plain-lane convolutions")
    if features.compiled:
        parts.append("compiled")
    return ", ".join(parts)


@lru_cache(maxsize=1)
def band_model() -> BandModel:
    text = resources.files("understudy.data").joinpath("error_bands.json").read_text()
    return BandModel.model_validate(json.loads(text))
