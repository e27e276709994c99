"""A job that runs past its time limit, in the real worker (each job in a process of its own): the job is stopped, its
rows are failed with a reason that names the limit, and the worker goes on to the next job."""

from __future__ import annotations

from rq import Queue

from .helpers import SLOWJOB, start_worker, stop, wait_for

WORKLOAD = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}


def test_a_job_over_its_time_limit_fails_with_the_reason_and_the_worker_goes_on(
        client, app, settings, auth, redis, workers):
    from app.core.config import get_settings

    # The API gives each job its limit when it queues it: 2 s here.
    app.dependency_overrides[get_settings] = lambda: settings.model_copy(update={"job_timeout_s": 2})
    slow = client.post("/v1/predictions", json={"workload": WORKLOAD, "targets": ["t4"], "estimator": "analytic"},
                       headers=auth).json()["data"][0]["id"]
    workers.append(worker := start_worker(env={"UNDERSTUDY_TEST_PREDICT_DELAY_S": "30"}, paths=(SLOWJOB,)))

    failed = wait_for(lambda: (body := client.get(f"/v1/predictions/{slow}").json())["status"] == "failed" and body,
                      60, "the slow job to be stopped")

    assert failed["error"] == "timed out after 2 s (the job time limit, UNDERSTUDY_JOB_TIMEOUT_S)"
    assert Queue("cpu", connection=redis).failed_job_registry.count == 1
    # The worker survived its job's timeout and takes the next one (which fails the same way: every job sleeps).
    after = client.post("/v1/predictions", json={"workload": {**WORKLOAD, "batch_size": 9}, "targets": ["t4"],
                                                  "estimator": "analytic"}, headers=auth).json()["data"][0]["id"]
    wait_for(lambda: client.get(f"/v1/predictions/{after}").json()["status"] == "running", 60,
             "the worker to take the next job")
    assert worker.poll() is None, stop(worker)
