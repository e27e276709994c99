"""A calibration belongs to the key that made it: another key's points change nothing for mine, absurd points are
refused, and a calibration is shared only by its id."""

from __future__ import annotations

from typing import Any

from tests.service.helpers import WORKLOAD, run_queued_jobs

GOOD = [{"workload": {**WORKLOAD, "batch_size": 16}, "measured_ms": 4.0},
        {"workload": {**WORKLOAD, "batch_size": 32}, "measured_ms": 9.0}]


def calibrate(client, headers, points: list[dict[str, Any]], target: str = "rtx-3090"):
    return client.post(f"/v1/targets/{target}/calibrations", json={"points": points, "base_estimator": "analytic"},
                       headers=headers)


def predict_calibrated(client, redis, headers, **extra: Any) -> dict[str, Any]:
    created = client.post("/v1/predictions", headers=headers, json={
        "workload": WORKLOAD, "targets": ["rtx-3090"], "estimator": "calibrated", **extra})
    assert created.status_code in (200, 202), created.text
    run_queued_jobs(redis)
    return client.get(f"/v1/predictions/{created.json()['data'][0]['id']}", headers=headers).json()


def test_another_keys_poisoned_calibration_changes_nothing_for_mine(client, redis, keys, configure):
    assert calibrate(client, keys.a, GOOD).status_code == 201
    before = predict_calibrated(client, redis, keys.a)

    poison = [{"workload": {**WORKLOAD, "batch_size": 8 + i}, "measured_ms": 600_000.0} for i in range(5)]
    assert calibrate(client, keys.b, poison).status_code == 201
    after = predict_calibrated(client, redis, keys.a)
    theirs = predict_calibrated(client, redis, keys.b)

    assert before["status"] == after["status"] == "done", (before, after)
    assert after["latency"]["min_ms"] == before["latency"]["min_ms"]
    assert theirs["latency"]["min_ms"] > 10 * before["latency"]["min_ms"]  # B's own requests use B's points


def test_a_key_without_a_calibration_of_its_own_is_not_given_another_keys(client, keys, configure):
    assert calibrate(client, keys.b, GOOD).status_code == 201

    answer = client.post("/v1/predictions", headers=keys.a, json={
        "workload": WORKLOAD, "targets": ["rtx-3090"], "estimator": "calibrated"})

    assert answer.status_code == 409
    assert "none of yours" in answer.json()["detail"]


def test_a_calibration_named_by_its_id_is_used_for_anyone(client, redis, keys, configure):
    shared = calibrate(client, keys.b, GOOD).json()["id"]

    prediction = predict_calibrated(client, redis, keys.a, calibration=shared)

    assert prediction["status"] == "done", prediction
    assert prediction["details"]["points"] == len(GOOD)


def test_a_key_lists_only_its_own_calibrations(client, keys, configure):
    mine = calibrate(client, keys.a, GOOD).json()["id"]
    calibrate(client, keys.b, GOOD)

    listed = client.get("/v1/targets/rtx-3090/calibrations", headers=keys.a).json()
    everything = client.get("/v1/targets/rtx-3090/calibrations", headers=keys.admin).json()

    assert [item["id"] for item in listed["data"]] == [mine]
    assert everything["count"] == 2


def test_the_issues_1000_denormal_points_are_refused_and_nothing_is_stored(client, keys, configure):
    points = [{"workload": WORKLOAD, "measured_ms": 5e-324}] * 1000

    answer = calibrate(client, keys.b, points)

    assert answer.status_code in (413, 422)  # too large a body, or too many points: either way not stored
    assert client.get("/v1/targets/rtx-3090/calibrations", headers=keys.admin).json()["count"] == 0


def test_at_most_50_points_so_that_one_fit_stays_bounded(client, keys, configure):
    points = [{"workload": {**WORKLOAD, "batch_size": 1 + i}, "measured_ms": 5.0} for i in range(51)]

    assert calibrate(client, keys.a, points).status_code == 422
    assert calibrate(client, keys.a, points[:50]).status_code == 201


def test_an_implausible_or_infinite_measurement_is_refused(client, keys, configure):
    for value in (5e-324, 0.001, 3_600_000.0):
        answer = calibrate(client, keys.a, [{"workload": WORKLOAD, "measured_ms": value}])
        assert answer.status_code == 422, value
        assert answer.json()["errors"][0]["field"] == "points[0].measured_ms"
    overflow = client.post("/v1/targets/rtx-3090/calibrations", headers={**keys.a, "Content-Type": "application/json"},
                           content=b'{"points": [{"workload": {"model": "resnet18"}, "measured_ms": 1e999}]}')
    assert overflow.status_code == 422
