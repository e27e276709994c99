"""A band model with known numbers for the band tests: the shipped one (understudy/data/error_bands.json) is refitted
from benchmarks, so no test may expect its numbers. Standardized errors are normal here, so a band's ends are the
normal quantiles a reader can check by hand (z(0.9) = 1.2816, z(0.75) = 0.6745, z(0.975) = 1.96)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from understudy.bands import (QUANTILE_LEVELS, BandModel, CalibrationShares, ErrorBand, EstimatorBand,
                              MemoryMargin)

NORMAL_Z = tuple(NormalDist().inv_cdf(level) for level in QUANTILE_LEVELS)


def known_band(center: float = 0.0, scale: float = 0.1) -> ErrorBand:
    return ErrorBand(model="test", center=center, scale=scale, z=NORMAL_Z, basis="a test band")


@pytest.fixture
def known_model() -> BandModel:
    """log(scale) = log(0.1), + 0.1 for training, + 0.4 for an architecture not seen; a peak's band 0.75x-1.25x for
    inference and 0.5x-1.5x for training (binary fractions: the thresholds compare exactly)."""
    return BandModel(
        version="test",
        seen_architectures=("Ampere",),
        power_limited_below=0.95,
        estimators={"analytic": EstimatorBand(center={"intercept": 0.0},
                                              log_scale={"intercept": math.log(0.1), "train": 0.1,
                                                         "unseen_architecture": 0.4},
                                              z=NORMAL_Z, rows=0)},
        memory=MemoryMargin(infer=(0.75, 1.25), train=(0.5, 1.5)),
        calibration=CalibrationShares(points=0.9, measured_elsewhere=0.75, measured_here=0.3),
    )
