"""Constants and small helpers the service tests share (conftest.py holds the fixtures)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis import Redis
from rq import SimpleWorker

from ledger.dispatch import rq_queue
from ledger.jobs import SERIALIZER, AllowListedJob

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "postgresql+psycopg://root@127.0.0.1:5432/test")
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SCHEMA = f"service_test_{os.getpid()}"
TABLES = ("calibrations", "predictions", "api_keys", "hosts")

# What the service processes (the app here, the job functions here, workers in subprocesses) read.
SERVICE_ENV = {
    "REDIS_URL": TEST_REDIS_URL,
    "UNDERSTUDY_REQUIRE_API_KEY": "true",
    "UNDERSTUDY_READ_REQUIRES_KEY": "false",
    # The tests run queued jobs in their own process (run_queued_jobs), with no worker registered.
    "UNDERSTUDY_REQUIRE_LIVE_WORKER": "false",
    "UNDERSTUDY_RECONCILE_INTERVAL_S": "0",  # the tests run the reconciler themselves
    "UNDERSTUDY_RECONCILE_GRACE_S": "30",
    "UNDERSTUDY_HOST_NAME": "testbox",
    "UNDERSTUDY_HEARTBEAT_S": "0.5",
    "UNDERSTUDY_LOCK_TTL_S": "2",
    "UNDERSTUDY_JOB_TIMEOUT_S": "120",
}

WORKLOAD = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}


@contextmanager
def service_environment(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The process's environment with `env` applied, settings read afresh from it; restored afterwards, so that other
    test packages never see it."""
    from understudy.settings import get_settings

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    get_settings.cache_clear()
    try:
        yield env
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


def run_queued_jobs(redis: Redis, queues: tuple[str, ...] = ("cpu",)) -> None:
    """Run every queued job in this process, as a worker would, until the queues are empty."""
    SimpleWorker([rq_queue(redis, name) for name in queues], connection=redis, serializer=SERIALIZER,
                 job_class=AllowListedJob).work(burst=True)


def queued_job_count(redis: Redis, queue: str = "cpu") -> int:
    return rq_queue(redis, queue).count


def predict_body(targets: list[Any] | None = None, **workload: Any) -> dict[str, Any]:
    return {"workload": {**WORKLOAD, **workload}, "targets": targets or ["rtx-3090"], "estimator": "analytic"}
