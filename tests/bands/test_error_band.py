"""A prediction's error band (understudy.bands.ErrorBand): the interval at a coverage is the predicted value times
exp(center + scale x z) at the coverage's two tail quantiles, linear between the shipped quantile levels, asked only
at coverages from 0.5 to 0.95; a calibration narrows it. Values below are computed by hand from normal quantiles."""

from __future__ import annotations

import math

import pytest

from understudy.bands import BandFeatures, BandModel, band_model
from understudy.results import PredictionResult, Status

from .conftest import known_band

Z_90, Z_75, Z_975 = 1.2815516, 0.6744898, 1.9599640  # the standard normal's quantiles at 0.9, 0.75 and 0.975


def test_the_80_percent_interval_spans_the_10th_to_the_90th_percentile_of_the_error() -> None:
    low, high = known_band(scale=0.1).interval(12.0, 0.8)
    assert low == pytest.approx(12.0 * math.exp(-0.1 * Z_90), rel=1e-6)  # 10.557
    assert high == pytest.approx(12.0 * math.exp(0.1 * Z_90), rel=1e-6)  # 13.641


def test_coverage_defaults_to_80_percent() -> None:
    assert known_band().interval(12.0) == known_band().interval(12.0, 0.8)


@pytest.mark.parametrize(("coverage", "z"), [(0.5, Z_75), (0.95, Z_975)])
def test_another_coverage_takes_its_own_tail_quantiles(coverage: float, z: float) -> None:
    low, high = known_band(scale=0.2).multipliers(coverage)
    assert (low, high) == (pytest.approx(math.exp(-0.2 * z), rel=1e-6), pytest.approx(math.exp(0.2 * z), rel=1e-6))


def test_the_center_shifts_both_ends_by_the_same_factor() -> None:
    low, high = known_band(center=0.05, scale=0.1).multipliers(0.8)
    assert (low, high) == (pytest.approx(math.exp(0.05 - 0.1 * Z_90), rel=1e-6),
                           pytest.approx(math.exp(0.05 + 0.1 * Z_90), rel=1e-6))


def test_a_coverage_between_the_shipped_levels_interpolates_their_quantiles_linearly() -> None:
    # 87 %: tails at 0.065 and 0.935, 0.6 of the way from the 0.05 level (z 1.6448536) to the 0.075 one (1.4395315).
    z = 1.6448536 - 0.6 * (1.6448536 - 1.4395315)  # 1.5216603, where the normal's own quantile is 1.5141
    low, high = known_band(scale=0.1).multipliers(0.87)
    assert (low, high) == (pytest.approx(math.exp(-0.1 * z), rel=1e-6), pytest.approx(math.exp(0.1 * z), rel=1e-6))


@pytest.mark.parametrize("coverage", [0.0, 0.49, 0.96, 1.0, math.nan])
def test_a_coverage_outside_half_to_95_percent_is_refused(coverage: float) -> None:
    with pytest.raises(ValueError, match="coverage must be from 0.5 to 0.95"):
        known_band().multipliers(coverage)


@pytest.mark.parametrize("coverage", [0.5, 0.95])
def test_the_ends_of_the_allowed_range_are_allowed(coverage: float) -> None:
    low, high = known_band().multipliers(coverage)
    assert low < 1 < high


def test_narrowing_scales_the_spread_and_the_center_by_the_share_and_says_why() -> None:
    narrowed = known_band(center=0.1, scale=0.2).narrowed(0.3, "the target measured this workload")
    assert (narrowed.center, narrowed.scale) == (pytest.approx(0.03), pytest.approx(0.06))
    assert narrowed.basis == "a test band; the target measured this workload"
    assert narrowed.multipliers(0.8)[1] == pytest.approx(math.exp(0.03 + 0.06 * Z_90), rel=1e-6)


def test_the_band_model_adds_the_log_scale_terms_of_what_it_knows_of_the_prediction(known_model: BandModel) -> None:
    features = BandFeatures(estimator="analytic", mode="train", architecture="Blackwell")
    band = known_model.band(features)
    assert band is not None
    assert band.scale == pytest.approx(0.1 * math.exp(0.1 + 0.4))  # training, and an architecture not seen
    assert band.basis == "analytic train, Blackwell (not seen in development), at full power"
    assert known_model.band(features.model_copy(update={"architecture": "Ampere", "mode": "infer"})).scale == (
        pytest.approx(0.1))


def test_the_convolution_share_weighs_in_and_an_unknown_one_counts_as_a_quarter(known_model: BandModel) -> None:
    fitted = known_model.estimators["analytic"]
    model = known_model.model_copy(update={"estimators": {"analytic": fitted.model_copy(
        update={"log_scale": {**fitted.log_scale, "convolution_share": 2.0}})}})
    features = BandFeatures(estimator="analytic", mode="infer", architecture="Ampere", convolution_share=0.3)
    band = model.band(features)
    assert band is not None
    assert band.scale == pytest.approx(0.1 * math.exp(2.0 * 0.3))  # 0.1822
    assert band.basis == "analytic infer, Ampere (seen in development), at full power, 30% in plain-lane convolutions"
    unknown = model.band(features.model_copy(update={"convolution_share": None}))
    assert unknown is not None and unknown.scale == pytest.approx(0.1 * math.exp(2.0 * 0.25))  # 0.1649


def test_a_compiled_workloads_band_is_widened_by_its_estimators_factor_and_says_so(known_model: BandModel) -> None:
    model = known_model.model_copy(update={"compiled_widening": {"analytic": 1.5}})
    features = BandFeatures(estimator="analytic", mode="infer", architecture="Ampere", compiled=True)
    band = model.band(features)
    assert band is not None
    assert band.scale == pytest.approx(0.1 * 1.5)
    assert band.multipliers(0.8)[1] == pytest.approx(math.exp(0.15 * Z_90), rel=1e-6)  # 1.2122
    assert band.basis == "analytic infer, Ampere (seen in development), at full power, compiled"
    eager = model.band(features.model_copy(update={"compiled": False}))
    assert eager is not None and eager.scale == pytest.approx(0.1)


def test_an_estimator_without_a_compiled_widening_keeps_its_band_when_compiled(known_model: BandModel) -> None:
    band = known_model.band(BandFeatures(estimator="analytic", mode="infer", architecture="Ampere", compiled=True))
    assert band is not None and band.scale == pytest.approx(0.1)


def test_an_estimator_the_model_has_no_residuals_of_has_no_band(known_model: BandModel) -> None:
    assert known_model.band(BandFeatures(estimator="flops", mode="infer")) is None


def test_a_predictions_interval_is_its_latency_times_its_bands_multipliers() -> None:
    result = PredictionResult(workload_digest="w", target_id="t4", estimator="analytic", estimator_version="1",
                              status=Status.done, latency_ms=12.0, band=known_band())
    assert result.interval_ms(0.8) == known_band().interval(12.0, 0.8)
    assert result.model_copy(update={"band": None}).interval_ms() is None
    assert result.model_copy(update={"latency_ms": None}).interval_ms() is None


def test_the_shipped_models_intervals_widen_with_coverage() -> None:
    model = band_model()
    band = model.band(BandFeatures(estimator="analytic", mode="infer", architecture="Ampere"))
    assert band is not None
    narrow, wide = band.multipliers(0.5), band.multipliers(0.95)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
