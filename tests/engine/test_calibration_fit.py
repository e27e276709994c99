"""The calibration's multi-parameter fit: one log-scale per kernel class and per mode, least squares on the log
error with a ridge toward the zero-shot prediction (understudy/calibration.py)."""

from __future__ import annotations

import math

import pytest

from understudy.calibration import Correction, FitPoint, fit_correction

PURE = {"tensor": {"tensor": 1.0, "simt": 0.0, "other": 0.0}, "other": {"tensor": 0.0, "simt": 0.0, "other": 1.0}}


def point(measured: float, shares: dict[str, float] | None, mode: str = "infer") -> FitPoint:
    return FitPoint(predicted_ms=10.0, measured_ms=measured, mode=mode, shares=shares)


def test_without_a_prior_each_class_gets_its_own_scale() -> None:
    fit = fit_correction([point(12, PURE["tensor"]), point(14, PURE["other"])], prior_points=1e-6)
    assert fit.factor(PURE["tensor"], "infer") == pytest.approx(1.2, rel=1e-4)
    assert fit.factor(PURE["other"], "infer") == pytest.approx(1.4, rel=1e-4)
    # A workload split evenly between the two classes gets the mean of their scales.
    assert fit.factor({"tensor": 0.5, "simt": 0.0, "other": 0.5}, "infer") == pytest.approx(1.3, rel=1e-4)


def test_one_point_moves_the_prediction_by_the_shrunk_share_of_its_error() -> None:
    # Residual r = log 1.5 on the 'other' and 'infer' scales, each pulled to 0 with weight 2:
    # minimising (r - a - b)^2 + 2 a^2 + 2 b^2 gives a = b = r / 4, so the factor is 1.5 ** (1 / 2).
    fit = fit_correction([point(15, PURE["other"])], prior_points=2.0)
    assert fit.factor(PURE["other"], "infer") == pytest.approx(1.5 ** 0.5, rel=1e-6)


def test_a_base_without_class_shares_fits_the_mode_scale_alone() -> None:
    fit = fit_correction([point(20, None, "train")], prior_points=1.0)
    # (r - b)^2 + b^2: b = r / 2, so the factor is 2 ** (1 / 2) for training and 1 for inference.
    assert fit.factor(None, "train") == pytest.approx(math.sqrt(2), rel=1e-6)
    assert fit.factor(None, "infer") == 1.0


def test_the_fit_round_trips_as_json() -> None:
    fit = fit_correction([point(12, PURE["tensor"]), point(8, PURE["other"], "train")])
    assert Correction.model_validate_json(fit.model_dump_json()) == fit


def test_no_usable_point_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one point"):
        fit_correction([])
