"""The calibrated estimator (engine.estimators.calibrated), run by the engine: the base's prediction times the
correction fitted to the calibration points (per kernel class and mode, from the base's class shares), times what
points measured on other targets say of the same workload, the target's own measurement of a workload given back for
it, a failed result for a target without a calibration, and
cache keys that follow the calibration. CPU only (analytic base)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.fakes import make_settings

from understudy.bands import ErrorBand, band_model
from understudy.calibration import (TRANSFER_WEIGHT, CalibrationPoint, CalibrationSet, FitPoint, fit_correction,
                                    log_residuals)
from understudy.catalog import catalog
from understudy.errors import UnderstudyError
from understudy.estimator_info import calibrated_version, estimator_info
from understudy.keys import ANY_HOST
from understudy.results import HostInfo, Status
from ledger.db import init_sqlite
from understudy.workload import Workload
from engine.engine import Engine
from engine.estimators import get_estimator
from cli.local import predict_cached

WORKLOAD = Workload(model="resnet18", mode="infer", batch_size=8, resolution=64, precision="fp32")
POINTS = [Workload(model="resnet18", mode="infer", batch_size=16, resolution=64, precision="fp32"),
          Workload(model="resnet18", mode="infer", batch_size=32, resolution=64, precision="fp32")]
RTX_3090 = catalog().get("rtx-3090")
T4 = catalog().get("t4")


@pytest.fixture
def engine(no_gpu: None) -> Engine:
    return Engine(make_settings())


def analytic_ms(engine: Engine, workload: Workload, target=RTX_3090) -> float:
    (result,) = engine.predict(workload, [target], "analytic")
    assert result.status == Status.done and result.latency_ms
    return result.latency_ms


def calibration(*measured_ms: float, base: str | None = None) -> CalibrationSet:
    points = [CalibrationPoint(workload=w, measured_ms=m) for w, m in zip(POINTS, measured_ms, strict=True)]
    return CalibrationSet(points=points, base_estimator=base)


def base_result(engine: Engine, workload: Workload, target=RTX_3090):  # type: ignore[no-untyped-def]
    (result,) = engine.predict(workload, [target], "analytic")
    return result


def test_the_prediction_is_the_base_prediction_times_the_fitted_correction(engine: Engine) -> None:
    calibrated = calibration(3.0, 9.0)
    base = base_result(engine, WORKLOAD)
    base_ms = base.latency_ms
    points = [base_result(engine, w) for w in POINTS]
    correction = fit_correction([FitPoint(predicted_ms=p.latency_ms, measured_ms=m, mode="infer",
                                          shares=p.details["class_shares"])
                                 for p, m in zip(points, [3.0, 9.0], strict=True)])
    scale = correction.factor(base.details["class_shares"], "infer")

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.status == Status.done
    assert result.latency_ms == pytest.approx(base_ms * scale)
    assert result.samples_per_s == pytest.approx(WORKLOAD.batch_size * 1000.0 / result.latency_ms)
    assert (result.estimator, result.estimator_version) == (
        "calibrated", calibrated_version("analytic", estimator_info("analytic").version, calibrated.digest()))
    assert result.host_fingerprint == ANY_HOST
    details = result.details
    assert (details["base_estimator"], details["base_version"]) == ("analytic", estimator_info("analytic").version)
    assert details["scale"] == pytest.approx(scale)
    assert (details["points"], details["points_used"], details["calibration"]) == (2, 2, calibrated.digest())
    assert details["base_latency_ms"] == pytest.approx(base_ms)


def fitted_on(engine: Engine, target, workloads: list[Workload], measured_ms: list[float]):  # type: ignore[no-untyped-def]
    """The fit points of `workloads` on `target`: analytic's predictions with their class shares."""
    results = [base_result(engine, w, target) for w in workloads]
    return [FitPoint(predicted_ms=r.latency_ms, measured_ms=m, mode=w.mode, shares=r.details["class_shares"])
            for r, w, m in zip(results, workloads, measured_ms, strict=True)]


def test_a_workload_measured_on_another_target_carries_its_residual_there_over(engine: Engine) -> None:
    own = fitted_on(engine, RTX_3090, POINTS, [3.0, 9.0])
    # Measured on a T4: the workload asked about and one other, each twice as slow as analytic says there.
    on_t4 = fitted_on(engine, T4, [WORKLOAD, POINTS[0]], [2 * analytic_ms(engine, WORKLOAD, T4),
                                                         2 * analytic_ms(engine, POINTS[0], T4)])
    t4_residual = log_residuals(on_t4, fit_correction(on_t4))[0]
    calibrated = CalibrationSet(points=[
        *(CalibrationPoint(workload=w, measured_ms=m) for w, m in zip(POINTS, [3.0, 9.0], strict=True)),
        *(CalibrationPoint(workload=p_workload, measured_ms=p.measured_ms, measured_on="t4")
          for p_workload, p in zip([WORKLOAD, POINTS[0]], on_t4, strict=True))])
    base = base_result(engine, WORKLOAD)
    target_scale = fit_correction(own).factor(base.details["class_shares"], "infer")

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    # The T4's own correction takes up part of the 2x (both its points agree); the rest is the workload's.
    assert 0 < t4_residual < math.log(2)
    assert result.details["target_scale"] == pytest.approx(target_scale)
    assert result.details["measured_elsewhere"] == 1
    assert result.latency_ms == pytest.approx(base.latency_ms * target_scale * math.exp(TRANSFER_WEIGHT * t4_residual))


def test_a_workload_no_other_target_measured_gets_the_target_correction_alone(engine: Engine) -> None:
    calibrated = CalibrationSet(points=[*calibration(3.0, 9.0).points,
                                        CalibrationPoint(workload=POINTS[0], measured_ms=50.0, measured_on="t4")])

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.details["measured_elsewhere"] == 0
    assert result.details["scale"] == pytest.approx(result.details["target_scale"])


def test_a_calibration_of_other_targets_alone_leaves_the_target_uncorrected_but_for_the_workload(
        engine: Engine) -> None:
    calibrated = CalibrationSet(points=[CalibrationPoint(workload=WORKLOAD, measured_ms=50.0, measured_on="t4")])

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.status == Status.done
    assert result.details["target_scale"] == 1.0
    assert result.details["measured_elsewhere"] == 1
    assert result.details["scale"] > 1.0  # 50 ms is slower than analytic's T4 price, shrunk by the T4's ridge


def test_a_workload_the_target_measured_is_answered_with_its_measurement(engine: Engine) -> None:
    calibrated = CalibrationSet(points=[CalibrationPoint(workload=WORKLOAD, measured_ms=7.0),
                                        *calibration(3.0, 9.0).points])

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.latency_ms == pytest.approx(7.0)
    assert (result.details["measured_here"], result.details["measured_elsewhere"]) == (1, 0)


def test_a_workload_measured_twice_is_answered_with_the_geometric_mean(engine: Engine) -> None:
    calibrated = CalibrationSet(points=[CalibrationPoint(workload=WORKLOAD, measured_ms=4.0),
                                        CalibrationPoint(workload=WORKLOAD, measured_ms=9.0)])

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.latency_ms == pytest.approx(6.0)


def test_the_targets_own_measurement_outranks_what_other_targets_measured(engine: Engine) -> None:
    calibrated = CalibrationSet(points=[CalibrationPoint(workload=WORKLOAD, measured_ms=7.0),
                                        CalibrationPoint(workload=WORKLOAD, measured_ms=50.0, measured_on="t4")])

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    assert result.latency_ms == pytest.approx(7.0)
    assert (result.details["measured_here"], result.details["measured_elsewhere"]) == (1, 0)


def test_a_real_bias_moves_the_prediction_by_the_shrunk_correction(engine: Engine) -> None:
    predicted = [analytic_ms(engine, w) for w in POINTS]
    calibrated = calibration(*(10.0 * p for p in predicted))

    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})

    # Two points that both say 10x move the prediction most of the way there, not all of it: the ridge pulls every
    # log-scale toward the zero-shot prediction.
    assert 1.5 < result.details["scale"] < 10.0
    assert result.latency_ms == pytest.approx(analytic_ms(engine, WORKLOAD) * result.details["scale"])


def test_each_target_uses_its_own_calibration_and_one_without_fails_saying_so(engine: Engine) -> None:
    calibrations = {"rtx-3090": calibration(3.0, 9.0), "t4": calibration(50.0, 100.0)}
    l4 = catalog().get("l4")

    results = engine.predict(WORKLOAD, [RTX_3090, l4, T4], "calibrated", calibrations=calibrations)

    assert [r.status for r in results] == [Status.done, Status.failed, Status.done]
    assert results[0].details["scale"] != results[2].details["scale"]
    assert results[2].latency_ms == pytest.approx(analytic_ms(engine, WORKLOAD, T4) * results[2].details["scale"])
    assert results[1].latency_ms is None
    assert "L4 (l4) has no calibration" in (results[1].error or "")
    assert "/v1/targets/l4/calibrations" in (results[1].error or "")


def test_without_any_calibration_every_target_fails(engine: Engine) -> None:
    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated")

    assert result.status == Status.failed
    assert result.estimator == "calibrated"
    assert "has no calibration" in (result.error or "")


def test_a_base_that_needs_a_gpu_fails_that_target_on_a_machine_without_one(engine: Engine) -> None:
    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated",
                               calibrations={"rtx-3090": calibration(3.0, 9.0, base="hostaware")})

    assert result.status == Status.failed
    assert "NVIDIA GPU" in (result.error or "")


def test_a_fit_is_made_once_and_reused_for_other_workloads(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calibrations = {"rtx-3090": calibration(3.0, 9.0)}
    engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations=calibrations)
    asked: list[str] = []
    predict = engine.predict

    def counting(workload, targets, estimator_name=None, progress=None, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(workload.digest())
        return predict(workload, targets, estimator_name, progress, **kwargs)

    monkeypatch.setattr(engine, "predict", counting)
    other = Workload(model="resnet18", mode="infer", batch_size=4, resolution=64, precision="fp32")
    (result,) = engine.predict(other, [RTX_3090], "calibrated", calibrations=calibrations)

    assert result.status == Status.done
    assert len(engine.fits) == 1
    assert set(asked) == {other.digest()}  # no point was predicted again


def test_a_changed_calibration_changes_the_cache_key(engine: Engine, tmp_path: Path) -> None:
    db = init_sqlite(f"sqlite:///{tmp_path / 'cache.sqlite'}")
    first = {"rtx-3090": calibration(3.0, 9.0)}
    changed = {"rtx-3090": calibration(3.0, 12.0)}

    assert engine.identity("calibrated", RTX_3090, first) != engine.identity("calibrated", RTX_3090, changed)
    assert engine.identity("calibrated", RTX_3090, first) == engine.identity("calibrated", RTX_3090,
                                                                             {"rtx-3090": calibration(3.0, 9.0)})
    ((fresh, hit_fresh),) = predict_cached(engine, db, WORKLOAD, [RTX_3090], "calibrated", calibrations=first)
    ((again, hit_again),) = predict_cached(engine, db, WORKLOAD, [RTX_3090], "calibrated", calibrations=first)
    ((other, hit_other),) = predict_cached(engine, db, WORKLOAD, [RTX_3090], "calibrated", calibrations=changed)

    assert (hit_fresh, hit_again, hit_other) == (False, True, False)
    assert again.latency_ms == pytest.approx(fresh.latency_ms)
    assert other.latency_ms != pytest.approx(fresh.latency_ms)
    assert other.estimator_version != fresh.estimator_version


def test_another_base_changes_the_version() -> None:
    digest = calibration(3.0, 9.0).digest()
    versions = {calibrated_version("analytic", "2", digest), calibrated_version("hostaware", "2", digest),
                calibrated_version("analytic", "3", digest)}
    assert len(versions) == 3
    assert all(len(v) <= 20 for v in versions)  # the ledger's estimator_version column


def test_the_registered_estimator_predicts_through_its_base_not_per_target() -> None:
    estimator = get_estimator("calibrated")
    assert (estimator.name, estimator.needs_gpu) == ("calibrated", False)
    with pytest.raises(UnderstudyError, match="predicts through its base"):
        estimator.plan(WORKLOAD, RTX_3090, HostInfo())


# --- the band: a calibration narrows its base's (understudy.bands), by the shares the shipped model holds ---------

def bands(engine: Engine, calibrated: CalibrationSet) -> tuple[ErrorBand, ErrorBand]:
    """(the base's band, the calibrated prediction's) for WORKLOAD on the RTX 3090."""
    base = base_result(engine, WORKLOAD)
    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated", calibrations={"rtx-3090": calibrated})
    assert base.band is not None and result.band is not None
    return base.band, result.band


def test_a_calibration_by_its_own_points_narrows_the_base_band_by_the_points_share(engine: Engine) -> None:
    share = band_model().calibration.points
    base, calibrated = bands(engine, calibration(3.0, 9.0))
    assert (calibrated.scale, calibrated.center) == (pytest.approx(base.scale * share),
                                                     pytest.approx(base.center * share))
    assert calibrated.basis == f"{base.basis}; calibrated on 2 point(s)"


def test_a_workload_measured_on_other_targets_narrows_the_band_by_that_share(engine: Engine) -> None:
    base, calibrated = bands(engine, CalibrationSet(points=[
        CalibrationPoint(workload=WORKLOAD, measured_ms=50.0, measured_on="t4")]))
    assert calibrated.scale == pytest.approx(base.scale * band_model().calibration.measured_elsewhere)
    assert calibrated.basis == f"{base.basis}; calibrated, 1 measurement(s) of it elsewhere"


def test_a_workload_the_target_measured_narrows_the_band_by_the_measured_share(engine: Engine) -> None:
    base, calibrated = bands(engine, CalibrationSet(points=[CalibrationPoint(workload=WORKLOAD, measured_ms=7.0),
                                                            *calibration(3.0, 9.0).points]))
    assert calibrated.scale == pytest.approx(base.scale * band_model().calibration.measured_here)
    assert calibrated.basis == f"{base.basis}; the target measured this workload"


def test_the_calibrated_interval_is_its_latency_times_the_narrowed_multipliers(engine: Engine) -> None:
    (result,) = engine.predict(WORKLOAD, [RTX_3090], "calibrated",
                               calibrations={"rtx-3090": calibration(3.0, 9.0)})
    assert result.band is not None and result.latency_ms is not None
    low, high = result.band.multipliers(0.9)
    assert result.interval_ms(0.9) == (pytest.approx(result.latency_ms * low), pytest.approx(result.latency_ms * high))
