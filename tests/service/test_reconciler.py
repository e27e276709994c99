"""Postgres is the ledger, Redis only transports: what Redis loses, the reconciler queues again."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session
from tests.waiting import wait_for

from ledger.dispatch import reconcile
from ledger.models import Prediction

from .helpers import predict_body, queued_job_count, run_queued_jobs, service_environment


def set_rows(db, **values) -> None:
    with Session(db) as session:
        session.execute(update(Prediction).values(**values))
        session.commit()


def test_a_request_survives_a_redis_flush_after_its_post(client, auth, redis, db, settings):
    created = client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4"]), headers=auth)
    ids = [item["id"] for item in created.json()["data"]]
    # FLUSHDB of the service's Redis database: the same loss as FLUSHALL or a restart without persistence, limited to
    # the database these tests own.
    redis.flushdb()
    assert queued_job_count(redis) == 0

    report = reconcile(db, redis, settings, grace_s=0)
    run_queued_jobs(redis)

    assert sorted(report.requeued) == sorted(ids) and len(report.jobs) == 1
    assert [client.get(f"/v1/predictions/{i}").json()["status"] for i in ids] == ["done", "done"]


def test_a_queued_row_whose_job_is_still_in_redis_is_left_alone(client, auth, redis, db, settings):
    client.post("/v1/predictions", json=predict_body(), headers=auth)

    report = reconcile(db, redis, settings, grace_s=0)

    assert not report
    assert queued_job_count(redis) == 1


def test_a_lost_row_younger_than_the_grace_period_is_left_for_its_request(client, auth, redis, db, settings):
    client.post("/v1/predictions", json=predict_body(), headers=auth)
    redis.flushdb()

    report = reconcile(db, redis, settings, grace_s=60)

    assert not report


def test_a_running_row_whose_worker_died_is_queued_again(client, auth, redis, db, settings):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)
    redis.flushdb()
    set_rows(db, status="running", worker_id="us-deadbox:gpu0-1-abcdef", attempts=1)

    report = reconcile(db, redis, settings, grace_s=60)  # no grace for running rows: the worker is known dead
    run_queued_jobs(redis)

    prediction = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    assert report.requeued and prediction["status"] == "done"
    assert prediction["attempts"] == 2


def test_a_running_row_whose_worker_is_alive_is_left_alone(client, auth, redis, db, settings):
    client.post("/v1/predictions", json=predict_body(), headers=auth)
    redis.set("understudy:alive:us-livebox:gpu0-1-abcdef", "1")
    set_rows(db, status="running", worker_id="us-livebox:gpu0-1-abcdef", attempts=1)
    redis.delete(*redis.keys("rq:*"))  # even with its job record gone, the live worker will write the result

    assert not reconcile(db, redis, settings, grace_s=0)


def test_a_row_whose_worker_keeps_dying_is_failed_with_the_reason(client, auth, redis, db, settings):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)
    set_rows(db, status="running", worker_id="us-deadbox:gpu0-1-abcdef", attempts=settings.max_attempts)

    report = reconcile(db, redis, settings, grace_s=0)

    prediction = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    assert report.given_up and not report.requeued
    assert prediction["status"] == "failed"
    assert "gave up after 3 attempts" in prediction["error"]


def test_two_reconcilers_at_once_queue_a_lost_row_once(client, auth, redis, db, settings):
    import threading

    client.post("/v1/predictions", json=predict_body(["t4", "l4", "rtx-4090"]), headers=auth)
    redis.flushdb()
    reports = []
    barrier = threading.Barrier(3)

    def run() -> None:
        barrier.wait()
        reports.append(reconcile(db, redis, settings, grace_s=0))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    requeued = [row for report in reports for row in report.requeued]
    assert len(requeued) == len(set(requeued)) == 3
    assert queued_job_count(redis) == sum(len(report.jobs) for report in reports)


def test_the_api_re_queues_lost_rows_on_its_own(app, auth, redis):
    from fastapi.testclient import TestClient

    with service_environment({"UNDERSTUDY_RECONCILE_INTERVAL_S": "0.2", "UNDERSTUDY_RECONCILE_GRACE_S": "0"}):
        with TestClient(app) as client:
            created = client.post("/v1/predictions", json=predict_body(), headers=auth)
            redis.flushdb()
            wait_for(lambda: queued_job_count(redis), 10, "the reconciler to queue the lost row again")
            run_queued_jobs(redis)
            prediction = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()

    assert prediction["status"] == "done"


def test_a_worker_token_names_its_slot_as_the_hosts_list_does():
    from ledger.dispatch import worker_slot, worker_token

    assert worker_slot(worker_token("gpu-box-2:gpu1", 4242, "a1b2c3")) == "gpu-box-2:gpu1"
    assert worker_slot("someone-elses-rq-worker") == "someone-elses-rq-worker"
    assert worker_slot(None) is None
