"""Calibrations through the service: POST a target's measured step times, then predictions with estimator
"calibrated" run through a worker and come back as the base (analytic here: no GPU needed) times the fitted
correction."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from .helpers import WORKLOAD, predict_body, queued_job_count, run_queued_jobs
from understudy.calibration import Correction, FitPoint, fit_correction
from understudy.catalog import catalog
from understudy.estimator_info import estimator_info
from understudy.results import HostInfo
from ledger.models import Calibration, Prediction
from understudy.workload import Workload

POINTS = [{"workload": {**WORKLOAD, "batch_size": 16}, "measured_ms": 4.0},
          {"workload": {**WORKLOAD, "batch_size": 32}, "measured_ms": 9.0}]


def analytic(workload: dict[str, Any], target: str = "rtx-3090") -> Any:
    from engine.estimators.analytic import AnalyticEstimator

    estimate = AnalyticEstimator().estimate(Workload.model_validate(workload), catalog().get(target), HostInfo(), None)
    assert estimate.latency_ms is not None
    return estimate


def analytic_ms(workload: dict[str, Any], target: str = "rtx-3090") -> float:
    return float(analytic(workload, target).latency_ms)


def fitted(points: list[dict[str, Any]]) -> Correction:
    """The correction the worker fits: analytic's predictions of the points, with their class shares."""
    estimates = [analytic(point["workload"]) for point in points]
    return fit_correction([FitPoint(predicted_ms=e.latency_ms, measured_ms=p["measured_ms"],
                                    mode=Workload.model_validate(p["workload"]).mode, shares=e.details["class_shares"])
                           for e, p in zip(estimates, points, strict=True)])


def fitted_scale(points: list[dict[str, Any]]) -> float:
    """The calibrated prediction of WORKLOAD over analytic's."""
    return fitted(points).factor(analytic(WORKLOAD).details["class_shares"], Workload.model_validate(WORKLOAD).mode)


def calibrate(client, auth, target: str = "rtx-3090", points: list[dict[str, Any]] | None = None, **extra: Any):
    return client.post(f"/v1/targets/{target}/calibrations", json={"points": points or POINTS, **extra}, headers=auth)


def calibrated_body(targets: list[Any] | None = None, **workload: Any) -> dict[str, Any]:
    return {**predict_body(targets, **workload), "estimator": "calibrated"}


def test_a_calibration_is_stored_and_a_calibrated_prediction_is_analytic_times_the_fitted_correction(client, auth,
                                                                                                      redis):
    stored = calibrate(client, auth)

    assert stored.status_code == 201, stored.text
    body = stored.json()
    assert (body["target_id"], body["k"], body["base_estimator"]) == ("rtx-3090", 2, "analytic")
    assert body["id"] and body["created_at"] and body["digest"]

    created = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    assert created.status_code == 202, created.text
    assert queued_job_count(redis) == 1
    run_queued_jobs(redis)
    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()

    scale = fitted_scale(POINTS)
    assert polled["status"] == "done", polled["error"]
    assert polled["estimator"] == "calibrated"
    assert polled["estimator_version"].startswith(estimator_info("calibrated").version + "+")
    assert polled["latency"]["min_ms"] == pytest.approx(analytic_ms(WORKLOAD) * scale)
    assert polled["details"]["scale"] == pytest.approx(scale)
    assert (polled["details"]["base_estimator"], polled["details"]["points"]) == ("analytic", 2)
    assert polled["details"]["calibration"] == body["digest"]
    assert "ran_estimator_version" not in polled["details"]  # the worker used the calibration the key names
    assert polled["host"]["host_class"] == "cpu"


def test_a_point_measured_on_another_target_is_stored_by_its_id_and_carries_its_residual_over(client, auth, redis):
    elsewhere = {"workload": WORKLOAD, "measured_ms": 50 * analytic_ms(WORKLOAD, "t4"), "measured_on": "Tesla T4"}
    stored = calibrate(client, auth, points=[*POINTS, elsewhere])
    assert stored.status_code == 201, stored.text
    assert stored.json()["points"][2]["measured_on"] == "t4"

    created = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    run_queued_jobs(redis)
    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()

    assert polled["status"] == "done", polled["error"]
    assert polled["details"]["measured_elsewhere"] == 1
    assert polled["details"]["target_scale"] == pytest.approx(fitted_scale(POINTS))
    assert polled["details"]["scale"] > 2 * polled["details"]["target_scale"]


def test_the_same_calibrated_request_again_comes_from_the_cache(client, auth, redis):
    calibrate(client, auth)
    client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    run_queued_jobs(redis)

    again = client.post("/v1/predictions", json=calibrated_body(), headers=auth)

    assert again.status_code == 200
    assert again.json()["cached"] is True


def test_a_new_calibration_is_a_new_cache_entry_and_is_the_one_used(client, auth, redis):
    calibrate(client, auth)
    first = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    run_queued_jobs(redis)
    newer = [{**POINTS[0], "measured_ms": 40.0}, {**POINTS[1], "measured_ms": 90.0}]
    calibrate(client, auth, points=newer)

    second = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    assert second.status_code == 202
    run_queued_jobs(redis)

    old = client.get(f"/v1/predictions/{first.json()['data'][0]['id']}").json()
    new = client.get(f"/v1/predictions/{second.json()['data'][0]['id']}").json()
    assert new["status"] == "done"
    assert new["estimator_version"] != old["estimator_version"]
    scale = fitted_scale(newer)
    assert new["latency"]["min_ms"] == pytest.approx(analytic_ms(WORKLOAD) * scale)


def test_a_failed_calibrated_prediction_asked_again_runs_again_with_its_calibration(client, auth, redis,
                                                                                   db: Engine):
    stored = calibrate(client, auth).json()
    created = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    redis.flushdb()
    with Session(db) as session:
        session.execute(update(Prediction).values(status="failed", error="the job's process died"))
        session.commit()

    again = client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    with Session(db) as session:
        queued = session.get(Prediction, created.json()["data"][0]["id"])
        assert queued is not None and queued.details == {"calibration_id": stored["id"]}
    run_queued_jobs(redis)

    assert again.status_code == 202
    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    assert polled["status"] == "done", polled["error"]
    assert polled["latency"]["min_ms"] == pytest.approx(analytic_ms(WORKLOAD) * fitted_scale(POINTS))
    assert polled["details"]["calibration"] == stored["digest"]


def test_the_worker_keeps_the_fit_with_the_calibration(client, auth, redis, db: Engine):
    calibrate(client, auth)
    client.post("/v1/predictions", json=calibrated_body(), headers=auth)
    run_queued_jobs(redis)

    with Session(db) as session:
        (row,) = session.scalars(select(Calibration)).all()
    (fit,) = row.parameters["fits"].values()
    assert fit["points_used"] == 2
    kept = Correction.model_validate(fit["correction"])
    assert kept.class_log_scales == pytest.approx(fitted(POINTS).class_log_scales)


def test_calibrations_are_listed_latest_first(client, auth):
    first = calibrate(client, auth).json()
    second = calibrate(client, auth, points=POINTS[:1]).json()
    calibrate(client, auth, target="t4")

    listed = client.get("/v1/targets/RTX 3090/calibrations")

    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()["data"]] == [second["id"], first["id"]]
    assert listed.json()["count"] == 2
    assert listed.json()["data"][0]["points"][0]["measured_ms"] == 4.0


def test_a_calibrated_prediction_without_a_calibration_is_409_naming_the_target(client, auth, redis):
    calibrate(client, auth)

    answer = client.post("/v1/predictions", json=calibrated_body(["rtx-3090", "t4"]), headers=auth)

    assert answer.status_code == 409
    assert "T4 (t4) has none" in answer.json()["detail"]
    assert "/v1/targets/t4/calibrations" in answer.json()["detail"]
    assert queued_job_count(redis) == 0


def test_an_inline_target_cannot_be_calibrated(client, auth):
    inline = {"name": "mine", "sm_count": 10, "boost_clock_mhz": 1500, "memory_bandwidth_gbps": 200,
              "memory_size_gb": 8}

    answer = client.post("/v1/predictions", json=calibrated_body([inline]), headers=auth)

    assert answer.status_code == 409
    assert "mine" in answer.json()["detail"]


def test_storing_a_calibration_needs_an_api_key(client):
    answer = client.post("/v1/targets/rtx-3090/calibrations", json={"points": POINTS})

    assert answer.status_code == 401


def test_an_unknown_target_is_404(client, auth):
    answer = calibrate(client, auth, target="voodoo-5")

    assert answer.status_code == 404
    assert "voodoo-5" in answer.json()["detail"]
    assert client.get("/v1/targets/voodoo-5/calibrations").status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"points": []}, "points"),
    ({"points": [{**POINTS[0], "measured_ms": 0}]}, "points[0].measured_ms"),
    ({"points": [{**POINTS[0], "workload": {**WORKLOAD, "model": "resnet_999"}}]}, "points[0].workload.model"),
    ({"points": [{"workload": WORKLOAD}]}, "points[0].measured_ms"),
    ({"points": POINTS, "base_estimator": "calibrated"}, "base_estimator"),
    ({"points": POINTS, "base_estimator": "crystal-ball"}, "base_estimator"),
    ({"points": [{**POINTS[0], "measured_on": "voodoo 5"}]}, "points[0].measured_on"),
])
def test_bad_points_are_422_naming_the_field(client, auth, body, field):
    answer = client.post("/v1/targets/rtx-3090/calibrations", json=body, headers=auth)

    assert answer.status_code == 422, answer.text
    assert field in {error["field"] for error in answer.json()["errors"]}
