"""The job function: one Engine.predict per group, results and failures written to the ledger with their reason."""

from __future__ import annotations

import time

import pytest
from rq import Queue

from understudy.results import PredictionResult, Status

from .helpers import predict_body, run_queued_jobs


class RecordingEngine:
    """An engine that answers from a table and records its calls (the GPU path is tested in tests/engine)."""

    def __init__(self, status: Status = Status.done, error: str | None = None) -> None:
        self.calls: list[tuple[str, list[str], str]] = []
        self.status, self.error = status, error

    def predict(self, workload, targets, estimator_name=None):
        self.calls.append((workload.model, [t.id for t in targets], estimator_name))
        return [PredictionResult(workload_digest=workload.digest(), target_id=t.id, estimator="analytic",
                                 estimator_version="1", status=self.status, error=self.error,
                                 latency_ms=None if self.error else 2.0, host_fingerprint="any")
                for t in targets]


@pytest.fixture
def engine(monkeypatch):
    fake = RecordingEngine()
    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: fake)
    return fake


def test_the_targets_of_one_request_share_one_engine_call(client, auth, redis, engine):
    client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4", "l4"]), headers=auth)

    run_queued_jobs(redis)

    assert engine.calls == [("resnet18", ["rtx-3090", "t4", "l4"], "analytic")]


def test_an_oom_is_a_result_and_is_cached(client, auth, redis, engine):
    engine.status, engine.error = Status.oom, "needs about 30.1 GB; Tesla T4 has 16 GB"
    created = client.post("/v1/predictions", json=predict_body(["t4"]), headers=auth)
    run_queued_jobs(redis)

    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    again = client.post("/v1/predictions", json=predict_body(["t4"]), headers=auth)

    assert (polled["status"], polled["error"]) == ("oom", "needs about 30.1 GB; Tesla T4 has 16 GB")
    assert again.status_code == 200 and again.json()["data"][0]["status"] == "oom"


def test_an_engine_error_fails_the_group_with_its_reason(client, auth, redis, monkeypatch):
    from understudy.errors import NoGpu

    class Broken:
        def predict(self, *args, **kwargs):
            raise NoGpu("estimator 'spec' times the workload on an NVIDIA GPU and this machine has none")

    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: Broken())
    created = client.post("/v1/predictions", json=predict_body(["t4", "l4"]), headers=auth)

    run_queued_jobs(redis)

    for item in created.json()["data"]:
        polled = client.get(f"/v1/predictions/{item['id']}").json()
        assert polled["status"] == "failed"
        assert "this machine has none" in polled["error"]


def test_a_job_over_its_time_limit_is_failed_with_the_reason(client, app, settings, auth, redis, monkeypatch):
    from app.core.config import get_settings

    app.dependency_overrides[get_settings] = lambda: settings.model_copy(update={"job_timeout_s": 1})

    class Slow:
        def predict(self, *args, **kwargs):
            time.sleep(5)

    monkeypatch.setattr("worker.tasks.engine_for", lambda gpu_index: Slow())
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)

    run_queued_jobs(redis)

    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    assert polled["status"] == "failed"
    assert polled["error"].startswith("timed out after 1 s")
    assert Queue("cpu", connection=redis).failed_job_registry.count == 1


def test_a_duplicate_job_for_rows_already_claimed_does_nothing(client, auth, redis, db, engine):
    from worker.tasks import run_predictions

    created = client.post("/v1/predictions", json=predict_body(), headers=auth)
    run_queued_jobs(redis)

    assert run_predictions([created.json()["data"][0]["id"]]) == {"claimed": 0}
    assert len(engine.calls) == 1


def test_a_job_whose_rows_are_already_final_answers_without_importing_torch(client, auth, redis, engine,
                                                                             service_env):
    """A duplicate job (the reconciler's) finds its rows done in the ledger before anything heavy is imported."""
    import json
    import os
    import subprocess
    import sys

    created = client.post("/v1/predictions", json=predict_body(["t4"]), headers=auth).json()
    run_queued_jobs(redis)
    ids = [item["id"] for item in created["data"]]
    code = ("import json, sys\nfrom worker.tasks import run_predictions\n"
            "answer = run_predictions(json.loads(sys.argv[1]))\n"
            "print(json.dumps({'answer': answer, 'torch': 'torch' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(ids)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **service_env})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"answer": {"claimed": 0}, "torch": False}
