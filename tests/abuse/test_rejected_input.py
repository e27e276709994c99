"""Absurd workloads, impossible inline targets and model names that are not timm models are refused with a 4xx before
anything reaches the ledger or the queue; no request can make a worker import or run code it names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ledger.dispatch import rq_queue

from ledger.queues import RUN_PREDICTIONS

WORKLOAD = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}
INLINE = {"name": "mine", "sm_count": 30, "boost_clock_mhz": 1700, "memory_bandwidth_gbps": 336, "memory_size_gb": 6}


def post(client: Any, auth: dict[str, str], workload: dict[str, Any] | None = None,
         targets: list[Any] | None = None, **extra: Any) -> Any:
    body = {"workload": {**WORKLOAD, **(workload or {})}, "targets": targets or ["t4"], "estimator": "analytic",
            **extra}
    return client.post("/v1/predictions", json=body, headers=auth)


ABSURD_WORKLOADS = [
    {"batch_size": 0}, {"batch_size": -1}, {"batch_size": 10**9}, {"batch_size": 2**63}, {"batch_size": 10**40},
    {"batch_size": 1.5}, {"batch_size": "64; DROP TABLE predictions"}, {"batch_size": None}, {"batch_size": [8]},
    {"resolution": 0}, {"resolution": 10**6}, {"resolution": -224}, {"resolution": [224]}, {"resolution": [224] * 3},
    {"resolution": [8, 10**5]}, {"resolution": [224.5, 224]}, {"resolution": "224"}, {"resolution": True},
    {"in_chans": 10**6}, {"num_classes": 10**9}, {"num_classes": 0}, {"lr": -1.0}, {"lr": 1e300},
    {"momentum": 1.0}, {"mode": "delete"}, {"precision": "fp8"}, {"optimizer": "os.system"},
    {"memory_format": "../etc"}, {"__class__": "Workload"}, {"model": None},
]


@pytest.mark.parametrize("workload", ABSURD_WORKLOADS, ids=[json.dumps(w)[:40] for w in ABSURD_WORKLOADS])
def test_an_absurd_workload_is_422_and_nothing_is_queued(client, auth, nothing_queued, workload):
    answer = post(client, auth, workload)

    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"].startswith("workload")
    nothing_queued()


IMPOSSIBLE_TARGETS = [
    {"sm_count": 0}, {"sm_count": -8}, {"sm_count": 10**6}, {"sm_count": 2.5}, {"boost_clock_mhz": 0},
    {"boost_clock_mhz": 1e9}, {"memory_bandwidth_gbps": -1}, {"memory_bandwidth_gbps": 1e12},
    {"memory_size_gb": 0}, {"memory_size_gb": 1e9}, {"l2_cache_mb": 0}, {"fp32_tflops": -3},
    {"fp16_tensor_tflops": 1e12}, {"name": ""}, {"name": "x" * 10_000}, {"architecture": "y" * 1000},
    {"__init__": "os.system"}, {"tdp_w": 0}, {"tdp_w": 1e6}, {"tdp_w": 100}, {"tdp_w": 100, "gpu_chip": "XX999"},
    {"tdp_w": 100, "gpu_chip": "GA106", "sustained_clock_mhz": 1500}, {"tdp_w": 2, "gpu_chip": "GA106"},
    {"gpu_chip": "z" * 100},
]


@pytest.mark.parametrize("change", IMPOSSIBLE_TARGETS, ids=[json.dumps(c)[:40] for c in IMPOSSIBLE_TARGETS])
def test_an_inline_target_with_impossible_values_is_422_and_nothing_is_queued(client, auth, nothing_queued, change):
    answer = post(client, auth, targets=["t4", {**INLINE, **change}])

    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"].startswith("targets[1]")
    nothing_queued()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_an_inline_target_are_422(client, auth, nothing_queued, value):
    text = json.dumps({"workload": WORKLOAD, "targets": [{**INLINE, "boost_clock_mhz": "@"}], "estimator": "analytic"})
    answer = client.post("/v1/predictions", content=text.replace('"@"', value),
                         headers=auth | {"Content-Type": "application/json"})

    assert answer.status_code == 422, answer.text
    nothing_queued()


NOT_TIMM_MODELS = ["os.system", "__import__", "builtins.eval", "subprocess.Popen", "worker.tasks.run_predictions",
                   "timm.models.resnet50", "resnet50; rm -rf /", "../../etc/passwd", "resnet50\x00", "", " resnet50",
                   "RESNET50", "resnet50" * 100, "{{7*7}}", "__builtins__"]


@pytest.mark.parametrize("model", NOT_TIMM_MODELS)
def test_a_model_name_not_in_timms_registry_is_422_and_nothing_is_queued(client, auth, nothing_queued, model):
    answer = post(client, auth, {"model": model})

    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == "workload.model"
    nothing_queued()


@pytest.mark.parametrize("extra", [{"func": "os.system"}, {"job": "builtins.exec"}, {"queue": "default"},
                                   {"job_id": "x"}, {"callable": "__import__"}, {"args": ["rm"]}])
def test_a_request_cannot_name_the_job_function_or_its_queue(client, auth, nothing_queued, extra):
    answer = post(client, auth, **extra)

    assert answer.status_code == 422, answer.text
    nothing_queued()


def test_the_queued_job_is_always_the_fixed_function_with_row_ids_only(client, auth, redis):
    answer = post(client, auth, targets=["t4", INLINE])

    assert answer.status_code == 202, answer.text
    (job,) = rq_queue(redis, "cpu").get_jobs()
    ids = [item["id"] for item in answer.json()["data"]]
    assert job.func_name == RUN_PREDICTIONS == "worker.tasks.run_predictions"
    assert list(job.args) == [ids] and job.kwargs == {}


def test_a_ledger_row_naming_code_as_its_model_is_failed_by_the_worker_without_running_it(
        db, redis, settings, monkeypatch):
    """Even a row written around the API (straight into the database) cannot make the worker run what it names: the
    job validates the workload against timm's registry again before anything builds a model."""
    import os

    from tests.service.helpers import run_queued_jobs
    from sqlalchemy.orm import Session

    from understudy.catalog import resolve_target
    from ledger.dispatch import enqueue, new_job_id
    from ledger.models import Prediction, new_id, utcnow

    called: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *args: called.append(args) or 0)
    job_id = new_job_id()
    with Session(db) as session:
        row = Prediction(
            id=new_id(), cache_key="forged", request_id="forged", status="queued", job_id=job_id, attempts=0,
            model="os.system", workload={**WORKLOAD, "model": "os.system"}, workload_digest="forged",
            target_id="t4", target=resolve_target("t4").model_dump(mode="json"), estimator="analytic",
            estimator_version="1", host_class="cpu", created_at=utcnow(), queued_at=utcnow())
        session.add(row)
        session.commit()
        row_id = row.id
    enqueue(redis, settings, queue="cpu", prediction_ids=[row_id], job_id=job_id)

    run_queued_jobs(redis)

    with Session(db) as session:
        failed = session.get(Prediction, row_id)
        assert failed is not None and failed.status == "failed"
        assert "unknown timm model 'os.system'" in (failed.error or "")
    assert called == []
