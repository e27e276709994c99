"""The calibration's multi-parameter fit: one log-scale per kernel class and per mode, least squares on the log
error with a ridge toward the zero-shot prediction, and what points measured on other targets carry over to the
same workload here (understudy/calibration.py)."""

from __future__ import annotations

import math

import pytest

from understudy.calibration import (TRANSFER_WEIGHT, CalibrationPoint, CalibrationSet, Correction, FitPoint,
                                    fit_correction, log_residuals, no_correction, transfer_factor)
from understudy.workload import Workload, sha256_of

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


def test_a_residual_is_what_the_measurement_says_beyond_the_corrected_prediction() -> None:
    # Predicted 10 ms, corrected by 1.2 on the tensor class: 12 ms; measured 15 ms, so the residual is log 1.25.
    correction = Correction(class_log_scales={"tensor": math.log(1.2)}, mode_log_scales={}, points=1)
    assert log_residuals([point(15, PURE["tensor"])], correction) == [pytest.approx(math.log(1.25))]


def test_a_workload_measured_elsewhere_takes_the_weighted_mean_of_its_residuals() -> None:
    # Residuals log 1.2 and log 1.8 on two other targets: mean log(1.2 x 1.8) / 2; half of it at weight 0.5.
    factor = transfer_factor([math.log(1.2), math.log(1.8)], weight=0.5)
    assert factor == pytest.approx((1.2 * 1.8) ** 0.25)
    assert transfer_factor([math.log(2.0)]) == pytest.approx(2.0 ** TRANSFER_WEIGHT)


def test_a_workload_measured_nowhere_else_is_left_as_it_is() -> None:
    assert transfer_factor([]) == 1.0
    assert no_correction().factor(PURE["tensor"], "train") == 1.0


def test_a_point_names_the_target_it_was_measured_on_by_its_catalog_id() -> None:
    workload = Workload(model="resnet18", mode="infer", batch_size=8)
    assert CalibrationPoint(workload=workload, measured_ms=3.0, measured_on="RTX 4090").measured_on == "rtx-4090"
    with pytest.raises(ValueError, match="voodoo"):
        CalibrationPoint(workload=workload, measured_ms=3.0, measured_on="voodoo 5")


def test_points_of_the_target_itself_keep_their_digest_and_another_target_makes_a_new_one() -> None:
    workload = Workload(model="resnet18", mode="infer", batch_size=8)
    own = CalibrationSet(points=[CalibrationPoint(workload=workload, measured_ms=3.0)])
    elsewhere = CalibrationSet(points=[CalibrationPoint(workload=workload, measured_ms=3.0, measured_on="t4")])
    # The digest calibrations had before points could name another target: existing cache keys stay valid.
    assert own.digest() == sha256_of([[workload.digest(), 3.0]])
    assert elsewhere.digest() != own.digest()
