"""Failures are reported as what they are: implausible specs (an infinite prediction, `batch_size: true`) are
refused, a result that is not finite fails its row with its own reason (and is not retried, nor blamed on a dying
worker), and errors read as messages, never as Python class names."""

from __future__ import annotations

from typing import Any

from tests.service.helpers import run_queued_jobs
from ledger.dispatch import reconcile
from understudy.results import PredictionResult, Status

from .helpers import body

TINY_RATE = {"name": "denormal", "sm_count": 10, "boost_clock_mhz": 1000, "memory_bandwidth_gbps": 100,
             "memory_size_gb": 4, "fp32_tflops": 5e-324}


class Infinite:
    def predict(self, workload: Any, targets: list[Any], estimator: str, **kwargs: Any) -> list[PredictionResult]:
        return [PredictionResult(workload_digest=workload.digest(), target_id=target.id, estimator=estimator,
                                 estimator_version="4", status=Status.done, latency_ms=float("inf"),
                                 samples_per_s=0.0) for target in targets]


class Crashing:
    def predict(self, *args: Any, **kwargs: Any) -> list[PredictionResult]:
        raise RuntimeError("the device went away")


def test_an_inline_target_with_a_denormal_rate_is_refused(client, keys, configure):
    answer = client.post("/v1/predictions", json=body([TINY_RATE]), headers=keys.a)

    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "targets[0].fp32_tflops"


def test_true_is_not_a_batch_size(client, keys, configure):
    answer = client.post("/v1/predictions", json=body(batch_size=True), headers=keys.a)

    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "workload.batch_size"


def test_an_infinite_result_fails_its_row_with_the_reason_and_is_not_retried(client, redis, db, settings, keys,
                                                                               configure, monkeypatch):
    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: Infinite())
    created = client.post("/v1/predictions", json=body(), headers=keys.a).json()["data"][0]["id"]

    run_queued_jobs(redis)
    report = reconcile(db, redis, settings, grace_s=0)

    row = client.get(f"/v1/predictions/{created}", headers=keys.a).json()
    assert row["status"] == "failed" and row["attempts"] == 1
    assert "latency_ms is not a finite number" in row["error"]
    assert not report


def test_a_job_that_raised_keeps_its_own_message_without_a_class_name_and_is_not_retried(
        client, redis, db, settings, keys, configure, monkeypatch):
    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: Crashing())
    created = client.post("/v1/predictions", json=body(), headers=keys.a).json()["data"][0]["id"]

    run_queued_jobs(redis)
    report = reconcile(db, redis, settings, grace_s=0)

    row = client.get(f"/v1/predictions/{created}", headers=keys.a).json()
    assert row["status"] == "failed"
    assert "the device went away" in row["error"] and "RuntimeError" not in row["error"]
    assert "died" not in row["error"]
    assert not report
