"""Admission is by work, not by request count: each key has a budget of estimated worker seconds and a cap on
waiting jobs (429 with Retry-After), a key's first waiting job goes ahead of another key's flood, a full queue answers
503, and so does a queue that no live worker serves, so that no job waits forever without a worker."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.service.helpers import run_queued_jobs
from ledger.admission import calibrated_seconds, estimate_seconds, waiting_key
from ledger.dispatch import rq_queue
from ledger.queues import alive_key
from ledger.models import Host, Prediction, utcnow
from understudy.calibration import CalibrationPoint, CalibrationSet
from understudy.workload import Workload

from .helpers import HEAVY, body

INLINE = [{"name": f"inline-{i}", "sm_count": 20 + i, "boost_clock_mhz": 1500, "memory_bandwidth_gbps": 300,
           "memory_size_gb": 8} for i in range(64)]


def test_a_heavy_request_costs_more_than_a_cheap_one():
    heavy = estimate_seconds(Workload.model_validate(HEAVY), "spec", 64)
    cheap = estimate_seconds(Workload.model_validate({"model": "resnet18", "batch_size": 8}), "analytic", 1)

    assert heavy > 100 * cheap


def test_a_calibrated_job_costs_its_base_and_the_points_its_fit_still_has_to_run():
    workload = Workload.model_validate({"model": "resnet18", "batch_size": 8})
    points = CalibrationSet(points=[
        CalibrationPoint(workload=Workload.model_validate({"model": "resnet18", "batch_size": 1 + i // 2}),
                         measured_ms=5.0, measured_on="t4" if i % 2 else None) for i in range(50)])

    fitted = calibrated_seconds(workload, "hostaware", 1, [])
    unfitted = calibrated_seconds(workload, "hostaware", 1, [("rtx-3090", points)])

    assert fitted == estimate_seconds(workload, "hostaware", 1)
    # 25 workloads, each measured on the RTX 3090 and on a T4: the fit runs each on both.
    assert unfitted == fitted + sum(estimate_seconds(p.workload, "hostaware", 2) for p in points.points[::2])


def test_a_populations_measurements_are_charged_as_the_work_they_make(client, keys, configure):
    configure(work_budget_s=60, work_window_s=600)
    measured = [{"target": "t4", "measured_ms": 5.0, "workload": {"model": "resnet18", "batch_size": 1 + i}}
                for i in range(50)]

    def population(headers: dict[str, str], batch_size: int, measurements: list[dict[str, Any]]) -> int:
        answer = client.post("/v1/populations", headers=headers, json={
            "workload": {"model": "resnet18", "batch_size": batch_size}, "estimator": "analytic",
            "devices": [{"target": "rtx-3090", "count": 1}], "measurements": measurements})
        return answer.status_code

    # One measured workload is a few seconds of tracing; fifty are about 150 s, the budget's worth and more.
    assert [population(keys.b, 8 + i, measured[:1]) for i in range(3)] == [202, 202, 202]
    assert [population(keys.a, 20, measured), population(keys.a, 21, measured[:1])] == [202, 429]


def test_past_its_budget_a_key_gets_429_with_retry_after_and_another_key_is_still_served(client, keys, configure):
    configure(work_budget_s=60, work_window_s=600)
    answers = [client.post("/v1/predictions", json={"workload": {**HEAVY, "batch_size": 1 + i}, "targets": INLINE,
                                                     "estimator": "analytic"}, headers=keys.a) for i in range(20)]

    statuses = [answer.status_code for answer in answers]
    assert statuses[0] == 202 and 429 in statuses
    refused = answers[statuses.index(429)]
    assert 1 <= int(refused.headers["Retry-After"]) <= 600
    assert "budget" in refused.json()["detail"]
    assert client.post("/v1/predictions", json=body(), headers=keys.b).status_code == 202


def test_a_key_may_have_only_so_many_jobs_waiting(client, keys, configure):
    configure(max_waiting_jobs_per_key=2)

    statuses = [client.post("/v1/predictions", json=body(batch_size=1 + i), headers=keys.a).status_code
                for i in range(3)]

    assert statuses == [202, 202, 429]


def test_another_keys_job_runs_right_after_the_floods_first(client, redis, db, keys, configure):
    flood = [client.post("/v1/predictions", json=body(batch_size=1 + i), headers=keys.a).json()["data"][0]["id"]
             for i in range(4)]
    mine = client.post("/v1/predictions", json=body(batch_size=64), headers=keys.b).json()["data"][0]["id"]

    queued = [list(job.args) for job in rq_queue(redis, "cpu").get_jobs()]
    run_queued_jobs(redis)

    assert queued == [[[flood[0]]], [[mine]]]  # the rest of the flood is held back by its key's limit
    with Session(db) as session:
        order = [row.id for row in sorted(session.scalars(select(Prediction)), key=lambda row: row.started_at)]
    assert order[:2] == [flood[0], mine] and sorted(order[2:]) == sorted(flood[1:])


def test_a_job_that_starts_is_no_longer_counted_as_waiting(client, redis, keys, configure):
    client.post("/v1/predictions", json=body(), headers=keys.a)
    assert redis.get(waiting_key("cpu", keys.a_id)) == b"1"

    run_queued_jobs(redis)

    assert redis.get(waiting_key("cpu", keys.a_id)) is None


def test_a_full_queue_answers_503_with_retry_after(client, keys, configure):
    configure(max_queue_depth=2)
    for i in range(2):
        assert client.post("/v1/predictions", json=body(batch_size=1 + i), headers=keys.a).status_code == 202

    answer = client.post("/v1/predictions", json=body(batch_size=3), headers=keys.b)

    assert answer.status_code == 503
    assert int(answer.headers["Retry-After"]) >= 1


def test_without_a_live_worker_a_job_is_refused_instead_of_waiting_forever(client, redis, db, keys, configure):
    configure(require_live_worker=True)

    refused = client.post("/v1/predictions", json=body(), headers=keys.a)

    assert refused.status_code == 503 and "no live worker" in refused.json()["detail"]
    token = "us-box:gpu0-1-abcdef"
    with Session(db) as session:
        session.add(Host(id="box:gpu0", host_class="cpu", fingerprint="cpu", last_heartbeat=utcnow(),
                         info={"queues": ["cpu"], "lock_token": token}))
        session.commit()
    assert client.post("/v1/predictions", json=body(), headers=keys.a).status_code == 503  # its liveness key expired
    redis.set(alive_key(token), "1")
    assert client.post("/v1/predictions", json=body(), headers=keys.a).status_code == 202


def test_a_cached_answer_is_served_whatever_the_budget(client, redis, keys, configure):
    client.post("/v1/predictions", json=body(), headers=keys.a)
    run_queued_jobs(redis)
    configure(work_budget_s=0.001, max_queue_depth=1, require_live_worker=True)

    assert client.post("/v1/predictions", json=body(), headers=keys.b).status_code == 200
