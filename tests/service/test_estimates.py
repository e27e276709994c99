"""Progressive answers: a prediction that waits for a GPU measurement is shown with a GPU-free estimate first
(status estimated), from the cache at once or from an estimate job at the front of the "cpu" queue, then with its
measured answer, the estimate kept beside it. Populations follow: provisional from estimates, then final.

The GPU is the only fake: a registered GPU host's queue is run by rq in this process with an engine whose GPU
estimator answers MEASURED_MS; the analytic estimator runs for real."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ledger.dispatch import reconcile, rq_queue
from ledger.models import Host, utcnow
from understudy.results import PredictionResult, Status

from .helpers import WORKLOAD, predict_body, queued_job_count, run_queued_jobs

FINGERPRINT = "f00dfeedf00dfeed"
GPU_QUEUE = f"gpu:{FINGERPRINT}"
MEASURED_MS = 1.25


class GpuStandIn:
    """The worker's engine with its GPU faked: the GPU-free estimator is the real one, a GPU estimator answers
    MEASURED_MS on every target (the GPU path is tested in tests/engine)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def predict(self, workload, targets, estimator_name=None, **kwargs):
        if estimator_name == "analytic":
            return self.real.predict(workload, targets, estimator_name)
        return [PredictionResult(workload_digest=workload.digest(), target_id=target.id, estimator=estimator_name,
                                 estimator_version="1", status=Status.done, latency_ms=MEASURED_MS,
                                 median_ms=MEASURED_MS, spread_ms=0.0, samples_per_s=8000 / MEASURED_MS,
                                 host_fingerprint=FINGERPRINT) for target in targets]


@pytest.fixture
def gpu(monkeypatch, db: Engine) -> None:
    """A GPU worker registered for GPU_QUEUE, whose jobs run_queued_jobs(redis, (GPU_QUEUE,)) runs on GpuStandIn."""
    from worker.tasks import engine_for

    stand_in = GpuStandIn(engine_for(0))
    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: stand_in)
    info = {"queues": [GPU_QUEUE, "cpu"], "estimators": {"hostaware": {"version": "1", "needs_gpu": True},
                                                        "analytic": {"version": "14", "needs_gpu": False}}}
    with Session(db) as session:
        session.add(Host(id="gpubox:gpu0", host_class=GPU_QUEUE, gpu_name="NVIDIA H200", fingerprint=FINGERPRINT,
                         info=info, last_heartbeat=utcnow()))
        session.commit()


def gpu_body(targets: list[str] | None = None) -> dict[str, Any]:
    return predict_body(targets) | {"estimator": "hostaware"}


def poll(client, item: dict[str, Any]) -> dict[str, Any]:
    answer = client.get(f"/v1/predictions/{item['id']}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_gpu_prediction_is_queued_then_estimated_then_done_on_polling(client, auth, redis, gpu):
    created = client.post("/v1/predictions", json=gpu_body(["rtx-3090", "t4"]), headers=auth).json()
    queued = [poll(client, item) for item in created["data"]]

    run_queued_jobs(redis, ("cpu",))
    estimated = [poll(client, item) for item in created["data"]]
    run_queued_jobs(redis, (GPU_QUEUE,))
    done = [poll(client, item) for item in created["data"]]

    assert [(p["status"], p["answer"], p["latency"], p["estimate"]) for p in queued] == [("queued", None, None,
                                                                                            None)] * 2
    for p in estimated:
        assert (p["status"], p["answer"], p["estimator"]) == ("estimated", "estimate", "hostaware")
        assert p["latency"]["min_ms"] == p["estimate"]["latency_ms"] > 0
        assert p["interval_ms"] == p["estimate"]["interval_ms"] and p["interval_ms"][0] < p["latency"]["min_ms"]
        assert p["samples_per_s"] == p["estimate"]["samples_per_s"] > 0
        assert p["memory"]["verdict"] == p["estimate"]["memory"]["verdict"] == "fits"
        assert (p["estimate"]["estimator"], p["estimate"]["status"]) == ("analytic", "done")
    for before, after in zip(estimated, done, strict=True):
        assert (after["status"], after["answer"], after["latency"]["min_ms"]) == ("done", "final", MEASURED_MS)
        assert after["estimate"] == before["estimate"]


def test_an_estimated_prediction_is_not_final_so_a_post_is_answered_202(client, auth, redis, gpu):
    client.post("/v1/predictions", json=gpu_body(), headers=auth)
    run_queued_jobs(redis, ("cpu",))

    again = client.post("/v1/predictions", json=gpu_body(), headers=auth)

    assert again.status_code == 202
    assert again.json()["data"][0]["status"] == "estimated"


def test_the_202_body_carries_an_analytic_answer_the_ledger_already_holds(client, auth, redis, gpu):
    client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4"]), headers=auth)
    run_queued_jobs(redis, ("cpu",))
    analytic = client.get("/v1/predictions", params={"estimator": "analytic"}).json()["data"]

    created = client.post("/v1/predictions", json=gpu_body(["rtx-3090", "t4"]), headers=auth)

    assert created.status_code == 202
    by_target = {p["target_id"]: p["latency"]["min_ms"] for p in analytic}
    for p in created.json()["data"]:
        assert (p["status"], p["answer"]) == ("estimated", "estimate")
        assert p["latency"]["min_ms"] == p["estimate"]["latency_ms"] == by_target[p["target_id"]]
    assert queued_job_count(redis, "cpu") == 0  # no estimate job: the answer was there


def test_the_estimate_job_goes_to_the_front_of_the_cpu_queue(client, auth, redis, gpu):
    client.post("/v1/predictions", json=predict_body(["l4"]), headers=auth)  # an analytic job waits on "cpu"

    client.post("/v1/predictions", json=gpu_body(), headers=auth)

    jobs = rq_queue(redis, "cpu").get_jobs()
    assert [job.func_name for job in jobs] == ["worker.tasks.estimate_predictions", "worker.tasks.run_predictions"]
    assert queued_job_count(redis, GPU_QUEUE) == 1


def test_an_analytic_request_gets_no_estimate_its_answer_needs_no_gpu(client, auth, redis, gpu):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth).json()

    assert [job.func_name for job in rq_queue(redis, "cpu").get_jobs()] == ["worker.tasks.run_predictions"]
    run_queued_jobs(redis, ("cpu",))
    polled = poll(client, created["data"][0])
    assert (polled["status"], polled["answer"], polled["estimate"]) == ("done", "final", None)


def test_status_estimated_filters_the_history_and_queued_leaves_those_rows_out(client, auth, redis, gpu):
    estimated = client.post("/v1/predictions", json=gpu_body(["rtx-3090"]), headers=auth).json()["data"][0]
    run_queued_jobs(redis, ("cpu",))
    waiting = client.post("/v1/predictions", json=gpu_body(["t4"]), headers=auth).json()["data"][0]

    def ids(status: str) -> list[str]:
        return [p["id"] for p in client.get("/v1/predictions", params={"status": status}, headers=auth).json()["data"]]

    assert ids("estimated") == [estimated["id"]]
    assert ids("queued") == [waiting["id"]]


def test_an_estimate_that_cannot_be_made_leaves_the_rows_waiting_and_nothing_to_reconcile(client, auth, redis, db,
                                                                                          settings, gpu, monkeypatch):
    class NoEstimate(GpuStandIn):
        def predict(self, workload, targets, estimator_name=None, **kwargs):
            if estimator_name == "analytic":
                raise RuntimeError("the trace failed")
            return super().predict(workload, targets, estimator_name)

    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: NoEstimate(None))
    created = client.post("/v1/predictions", json=gpu_body(), headers=auth).json()

    run_queued_jobs(redis, ("cpu",))

    polled = poll(client, created["data"][0])
    assert (polled["status"], polled["error"], polled["estimate"]) == ("queued", None, None)
    assert not reconcile(db, redis, settings, grace_s=0)
    run_queued_jobs(redis, (GPU_QUEUE,))
    assert poll(client, created["data"][0])["status"] == "done"


def test_a_population_is_provisional_from_its_devices_estimates_then_final(client, auth, redis, gpu):
    body = {"workload": WORKLOAD, "estimator": "hostaware", "k": [2],
            "devices": [{"target": "rtx-3090", "count": 3}, {"target": "t4", "count": 1}]}
    created = client.post("/v1/populations", json=body, headers=auth)
    assert created.status_code == 202
    population_id = created.json()["id"]

    run_queued_jobs(redis, ("cpu",))
    provisional = client.get(f"/v1/populations/{population_id}").json()
    run_queued_jobs(redis, (GPU_QUEUE,))
    final = client.get(f"/v1/populations/{population_id}").json()

    assert created.json()["status"] == "queued" and created.json()["summary"] is None
    assert provisional["status"] == "estimated"
    assert [(d["status"], d["answer"]) for d in provisional["devices"]] == [("estimated", "estimate")] * 2
    estimates = sorted(d["latency_ms"] for d in provisional["devices"])
    assert (provisional["summary"]["min_ms"], provisional["summary"]["max_ms"]) == (estimates[0], estimates[1])
    assert final["status"] == "done"
    assert [(d["status"], d["answer"], d["latency_ms"]) for d in final["devices"]] == [("done", "final",
                                                                                        MEASURED_MS)] * 2
    assert final["summary"]["min_ms"] == final["summary"]["max_ms"] == MEASURED_MS
