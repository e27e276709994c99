"""POST /v1/populations against a live service: the predictions run on a worker, then the summary matches the
definitions worked out by hand from the per-device latencies the service reports."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.live_service import LiveService
from tests.waiting import wait_for
from sqlalchemy import update
from sqlalchemy.orm import Session

from ledger.models import Population, Prediction

WORKLOAD = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}
PHONE = {"name": "Phone-class GPU", "sm_count": 4, "boost_clock_mhz": 1000, "memory_bandwidth_gbps": 50,
         "memory_size_gb": 4}


def post(live: LiveService, body: dict[str, Any], key: str | None = "default") -> httpx.Response:
    headers = {"X-API-Key": live.api_key if key == "default" else key} if key else {}
    return httpx.post(f"{live.url}/v1/populations", json=body, headers=headers, timeout=30)


def get(live: LiveService, path: str) -> dict[str, Any]:
    answer = httpx.get(f"{live.url}{path}", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def finished(live: LiveService, population_id: str) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        body = get(live, f"/v1/populations/{population_id}")
        return body if body["status"] in ("done", "failed") else None

    return wait_for(final, 60, f"population {population_id} to finish", interval_s=0.1)


def test_a_population_is_predicted_then_summarised_as_worked_out_by_hand(live):
    live.pause_workers()
    body = {"workload": WORKLOAD, "estimator": "analytic", "k": [1, 2, 10], "slowest": 2,
            "devices": [{"target": "rtx-3090", "count": 6}, {"target": "t4", "count": 3},
                        {"target": PHONE, "count": 1}]}

    created = post(live, body)

    assert created.status_code == 202, created.text
    queued = created.json()
    assert queued["status"] == "queued" and queued["summary"] is None
    assert [d["status"] for d in queued["devices"]] == ["queued"] * 3
    live.resume_workers()
    result = finished(live, queued["id"])
    assert result["status"] == "done"

    devices = {d["target_id"]: d for d in result["devices"]}
    phone_id = result["devices"][2]["target_id"]
    assert phone_id.startswith("inline-") and devices[phone_id]["target_name"] == "Phone-class GPU"
    assert [devices[t]["weight"] for t in ("rtx-3090", "t4", phone_id)] == [6, 3, 1]
    assert [devices[t]["share"] for t in ("rtx-3090", "t4", phone_id)] == pytest.approx([0.6, 0.3, 0.1])
    for device in devices.values():  # each latency is its prediction's
        prediction = get(live, f"/v1/predictions/{device['prediction_id']}")
        assert device["latency_ms"] == prediction["latency"]["min_ms"] > 0

    # By hand: order the three latencies l1 < l2 < l3 with shares w1, w2, w3; F1 = w1, F2 = w1 + w2, F3 = 1.
    (l1, w1), (l2, w2), (l3, w3) = sorted((d["latency_ms"], d["share"]) for d in devices.values())
    assert l1 < l2 < l3
    f1, f2 = w1, w1 + w2
    summary = result["summary"]
    assert summary["devices"] == 3 and summary["share"] == pytest.approx(1.0) and summary["excluded"] == []
    assert summary["mean_ms"] == pytest.approx(w1 * l1 + w2 * l2 + w3 * l3)
    assert (summary["min_ms"], summary["max_ms"]) == (l1, l3)
    # The q-quantile is the first latency whose F reaches q.
    assert summary["p50_ms"] == next(ms for ms, f in ((l1, f1), (l2, f2), (l3, 1.0)) if f >= 0.5)
    assert summary["p90_ms"] == next(ms for ms, f in ((l1, f1), (l2, f2), (l3, 1.0)) if f >= 0.9 - 1e-12)
    assert summary["p99_ms"] == l3
    expected = {k: l1 * f1**k + l2 * (f2**k - f1**k) + l3 * (1 - f2**k) for k in (1, 2, 10)}
    assert {r["k"]: r["expected_max_ms"] for r in summary["round_time"]} == pytest.approx(expected)
    assert expected[1] == pytest.approx(summary["mean_ms"])
    assert [(s["latency_ms"], s["share"]) for s in summary["slowest"]] == [(l3, pytest.approx(w3)),
                                                                           (l2, pytest.approx(w2))]

    with Session(live.db) as session:  # kept in Postgres, summary and all
        stored = session.get(Population, queued["id"])
        assert stored is not None and stored.status == "done" and stored.finished_at is not None
        assert stored.summary == summary and stored.ks == [1, 2, 10] and stored.weighting == "count"


def test_the_same_target_twice_adds_up_and_a_cached_population_answers_at_once(live):
    body = {"workload": WORKLOAD, "estimator": "analytic", "k": 4,
            "devices": [{"target": "rtx-3090", "weight": 0.5}, {"target": "RTX 3090", "weight": 0.25},
                        {"target": "t4", "weight": 0.25}]}
    first = finished(live, post(live, body).json()["id"])

    again = post(live, body)

    assert [(d["target_id"], d["weight"], d["share"]) for d in first["devices"]] == [
        ("rtx-3090", 0.75, 0.75), ("t4", 0.25, 0.25)]
    assert again.status_code == 200  # every prediction cached: summarised in the answer itself
    cached = again.json()
    assert cached["status"] == "done" and cached["id"] != first["id"]
    assert cached["summary"] == first["summary"] and cached["k"] == [4]
    (l1, w1), (l2, _) = sorted((d["latency_ms"], d["share"]) for d in first["devices"])
    assert cached["summary"]["round_time"][0]["expected_max_ms"] == pytest.approx(l1 * w1**4 + l2 * (1 - w1**4))
    listed = get(live, "/v1/populations")
    assert listed["count"] == 2 and [p["id"] for p in listed["data"]] == [cached["id"], first["id"]]


def test_a_device_the_workload_does_not_fit_is_left_out_and_reported(live):
    live.pause_workers()
    body = {"workload": WORKLOAD, "estimator": "analytic", "k": [2],
            "devices": [{"target": "rtx-3090", "count": 2}, {"target": "t4", "count": 1},
                        {"target": "l4", "count": 1}]}
    created = post(live, body).json()
    t4 = next(d["prediction_id"] for d in created["devices"] if d["target_id"] == "t4")
    with Session(live.db) as session:  # what a GPU estimator records for a workload too big for the target
        session.execute(update(Prediction).where(Prediction.id == t4).values(status="oom", error="needs 20 GB"))
        session.commit()
    live.resume_workers()

    result = finished(live, created["id"])

    summary = result["summary"]
    assert result["status"] == "done"
    assert summary["excluded"] == [{"target_id": "t4", "target_name": "NVIDIA Tesla T4", "status": "oom",
                                    "share": 0.25, "reason": "needs 20 GB"}]
    assert (summary["devices"], summary["weight"], summary["share"]) == (2, 3.0, 0.75)
    # Over the devices that ran: rtx-3090 (2 of 3) and l4 (1 of 3).
    (l1, w1), (l2, _) = sorted((d["latency_ms"], d["weight"] / 3) for d in result["devices"] if d["status"] == "done")
    assert summary["round_time"][0]["expected_max_ms"] == pytest.approx(l1 * w1**2 + l2 * (1 - w1**2))
    assert [s["share"] for s in summary["slowest"]] == pytest.approx(
        [1 / 4 if s["target_id"] == "l4" else 2 / 4 for s in summary["slowest"]])


def test_a_population_where_no_device_can_run_fails_saying_why(live):
    live.pause_workers()
    created = post(live, {"workload": {**WORKLOAD, "batch_size": 2}, "estimator": "analytic",
                          "devices": [{"target": "t4", "count": 1}, {"target": "l4", "count": 1}]}).json()
    with Session(live.db) as session:
        session.execute(update(Prediction).where(Prediction.id.in_([d["prediction_id"] for d in created["devices"]]))
                        .values(status="oom", error="does not fit"))
        session.commit()
    live.resume_workers()

    result = finished(live, created["id"])

    assert result["status"] == "failed" and result["summary"] is None
    assert result["error"].startswith("no device in the population could run the workload")
    assert "t4: oom (does not fit)" in result["error"]


@pytest.mark.parametrize("change, field", [
    ({"devices": [{"target": "t4", "count": 1, "weight": 0.5}]}, "devices[0]"),
    ({"devices": [{"target": "t4"}]}, "devices[0]"),
    ({"devices": [{"target": "t4", "count": 1}, {"target": "l4", "weight": 0.5}]}, "devices"),
    ({"devices": []}, "devices"),
    ({"devices": [{"target": "no-such-gpu", "count": 1}]}, "devices[0].target"),
    ({"devices": [{"target": {**PHONE, "sm_count": 0}, "count": 1}]}, "devices[0].target.sm_count"),
    ({"devices": [{"target": "t4", "count": 0}]}, "devices[0].count"),
    ({"devices": [{"target": "t4", "weight": -1}]}, "devices[0].weight"),
    ({"k": [0]}, "k[0]"),
    ({"k": []}, "k"),
    ({"workload": {**WORKLOAD, "batch_size": 0}}, "workload.batch_size"),
    ({"estimator": "oracle"}, "estimator"),
])
def test_a_bad_population_is_a_422_naming_the_field(live, change, field):
    body = {"workload": WORKLOAD, "devices": [{"target": "t4", "count": 1}], **change}

    answer = post(live, body)

    assert answer.status_code == 422, answer.text
    assert field in [error["field"] for error in answer.json()["errors"]], answer.json()


def test_a_population_needs_a_key_and_an_unknown_one_is_404(live):
    body = {"workload": WORKLOAD, "devices": [{"target": "t4", "count": 1}]}
    assert post(live, body, key=None).status_code == 401
    assert post(live, body, key="us_wrong").status_code == 401
    missing = httpx.get(f"{live.url}/v1/populations/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
