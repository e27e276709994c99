"""POST a workload, let a worker run it, poll the result; repeats come from the cache; identical requests run once."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from understudy.estimator_info import estimator_info
from ledger.models import Prediction, utcnow

from .helpers import WORKLOAD, predict_body, queued_job_count, run_queued_jobs


def ledger_count(db: Engine) -> int:
    with Session(db) as session:
        return session.scalar(select(func.count()).select_from(Prediction)) or 0


def test_a_post_is_queued_then_a_worker_run_makes_the_poll_return_the_result(client, auth, redis):
    created = client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4"]), headers=auth)

    assert created.status_code == 202
    ids = [item["id"] for item in created.json()["data"]]
    assert [item["status"] for item in created.json()["data"]] == ["queued", "queued"]
    assert queued_job_count(redis) == 1  # both targets in one job: one Engine.predict call

    run_queued_jobs(redis)

    for prediction_id, target in zip(ids, ["rtx-3090", "t4"], strict=True):
        polled = client.get(f"/v1/predictions/{prediction_id}")
        assert polled.status_code == 200
        body = polled.json()
        assert body["status"] == "done"
        assert body["target_id"] == target
        assert body["latency"]["min_ms"] > 0
        assert body["latency"]["median_ms"] >= body["latency"]["min_ms"]
        assert body["samples_per_s"] > 0
        assert (body["estimator"], body["estimator_version"]) == ("analytic", estimator_info("analytic").version)
        assert body["host"]["host_class"] == "cpu"
        assert body["error"] is None
        assert body["attempts"] == 1


def test_the_same_request_again_is_served_from_the_cache_without_a_job(client, auth, redis):
    first = client.post("/v1/predictions", json=predict_body(), headers=auth)
    run_queued_jobs(redis)

    again = client.post("/v1/predictions", json=predict_body(), headers=auth)

    assert again.status_code == 200
    assert again.json()["cached"] is True
    assert again.json()["data"][0]["id"] == first.json()["data"][0]["id"]
    assert again.json()["data"][0]["status"] == "done"
    assert queued_job_count(redis) == 0


def test_a_workload_written_with_its_defaults_spelled_out_hits_the_same_cache_entry(client, auth, redis):
    client.post("/v1/predictions", json=predict_body(), headers=auth)
    run_queued_jobs(redis)
    spelled_out = predict_body(resolution=[64, 64], in_chans=3, num_classes=1000, memory_format="nchw")

    again = client.post("/v1/predictions", json=spelled_out, headers=auth)

    assert again.status_code == 200


def test_two_identical_concurrent_posts_make_one_row_and_one_job(client, auth, redis, db):
    barrier = threading.Barrier(6)
    answers: list = []

    def post() -> None:
        barrier.wait()
        answers.append(client.post("/v1/predictions", json=predict_body(["rtx-4090", "l4"]), headers=auth))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [answer.status_code for answer in answers] == [202] * 6
    assert len({tuple(item["id"] for item in answer.json()["data"]) for answer in answers}) == 1
    assert ledger_count(db) == 2
    assert queued_job_count(redis) == 1


def test_a_repeated_target_in_one_request_is_one_prediction(client, auth, redis, db):
    created = client.post("/v1/predictions", json=predict_body(["rtx-3090", "RTX 3090"]), headers=auth)

    ids = [item["id"] for item in created.json()["data"]]
    assert len(ids) == 2 and ids[0] == ids[1]
    assert ledger_count(db) == 1


def test_an_inline_target_is_predicted_like_a_catalog_one(client, auth, redis):
    inline = {"name": "My laptop GPU", "sm_count": 30, "boost_clock_mhz": 1700, "memory_bandwidth_gbps": 336,
              "memory_size_gb": 6}
    created = client.post("/v1/predictions", json=predict_body([inline]), headers=auth)
    run_queued_jobs(redis)

    body = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()

    assert body["status"] == "done"
    assert body["target_id"].startswith("inline-")
    assert body["target_name"] == "My laptop GPU"


def test_an_inline_target_given_its_power_limit_and_chip_runs_slower_than_at_its_boost_clock(client, auth, redis):
    laptop = {"name": "RTX 4090 Laptop", "sm_count": 76, "boost_clock_mhz": 2040, "memory_bandwidth_gbps": 576,
              "memory_size_gb": 16}
    created = client.post("/v1/predictions", json=predict_body([laptop, {**laptop, "gpu_chip": "AD103",
                                                                         "tdp_w": 80}]), headers=auth)
    run_queued_jobs(redis)

    full, limited = (client.get(f"/v1/predictions/{item['id']}").json() for item in created.json()["data"])

    assert (full["status"], limited["status"]) == ("done", "done")
    assert limited["target_id"] != full["target_id"]
    assert limited["latency"]["min_ms"] > full["latency"]["min_ms"]


def test_a_catalog_gpu_under_a_power_limit_is_its_own_target_and_runs_slower(client, auth, redis):
    created = client.post("/v1/predictions", json=predict_body(["rtx-4090", "RTX 4090 @ 150 W"]), headers=auth)
    run_queued_jobs(redis)

    full, capped = (client.get(f"/v1/predictions/{item['id']}").json() for item in created.json()["data"])

    assert (capped["status"], capped["target_id"], capped["target_name"]) == (
        "done", "rtx-4090@150w", "GeForce RTX 4090 at 150 W")
    assert capped["latency"]["min_ms"] > full["latency"]["min_ms"]


def test_a_failed_prediction_runs_again_when_asked_again(client, auth, redis, db):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)
    prediction_id = created.json()["data"][0]["id"]
    redis.flushdb()
    with Session(db) as session:
        session.execute(update(Prediction).values(status="failed", error="the job's process died"))
        session.commit()

    again = client.post("/v1/predictions", json=predict_body(), headers=auth)
    run_queued_jobs(redis)

    assert again.status_code == 202
    assert again.json()["data"][0]["id"] == prediction_id
    polled = client.get(f"/v1/predictions/{prediction_id}").json()
    assert (polled["status"], polled["error"]) == ("done", None)


def test_an_unknown_prediction_id_is_404(client):
    answer = client.get("/v1/predictions/0123456789abcdef0123456789abcdef")

    assert answer.status_code == 404
    assert "no prediction" in answer.json()["detail"]


def test_the_history_is_filtered_and_paged(client, auth, redis):
    client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4", "l4"]), headers=auth)
    client.post("/v1/predictions", json=predict_body(["t4"], model="mobilenetv3_small_050"), headers=auth)
    run_queued_jobs(redis)

    everything = client.get("/v1/predictions").json()
    by_model = client.get("/v1/predictions", params={"model": "mobilenetv3_small_050"}).json()
    by_target = client.get("/v1/predictions", params={"target": "t4"}).json()
    page = client.get("/v1/predictions", params={"skip": 1, "limit": 2}).json()
    done_on_cpu = client.get("/v1/predictions", params={"status": "done", "host": "cpu",
                                                        "estimator": "analytic"}).json()
    future = client.get("/v1/predictions", params={"since": (utcnow() + timedelta(hours=1)).isoformat()}).json()

    assert everything["count"] == 4
    assert [item["model"] for item in by_model["data"]] == ["mobilenetv3_small_050"]
    assert by_target["count"] == 2 and {item["target_id"] for item in by_target["data"]} == {"t4"}
    assert page["count"] == 4 and len(page["data"]) == 2
    assert page["data"][0]["id"] == everything["data"][1]["id"]
    assert done_on_cpu["count"] == 4
    assert future["count"] == 0


def test_an_unknown_status_filter_is_422(client):
    answer = client.get("/v1/predictions", params={"status": "finished"})

    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "status"


def test_the_answer_keeps_the_workload_in_canonical_form(client, auth):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)

    workload = created.json()["data"][0]["workload"]

    assert workload["model"] == WORKLOAD["model"]
    assert workload["resolution"] == [64, 64]
    assert workload["optimizer"] == "none"  # inference has no optimizer
