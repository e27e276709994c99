"""Writing to Redis runs no code on a worker, and the deployment ships no default secret: jobs are JSON naming one
allow-listed function (never pickles), compose has no default Redis or PostgreSQL password, and the documentation
pages load nothing from elsewhere (no CDN)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from rq import Queue

from tests.service.helpers import run_queued_jobs
from ledger.dispatch import rq_queue

REPO = Path(__file__).resolve().parents[2]


def mark(path: str) -> None:
    """What a forged job wants to run: here it only leaves a file behind."""
    Path(path).write_text("pwned")


class Payload:
    """Unpickling this calls mark(): what a pickled job forged in Redis could make a worker do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (mark, (str(self.path),))


def test_a_pickled_job_forged_in_redis_is_never_unpickled(redis, tmp_path):
    marker = tmp_path / "pwned"
    Queue("cpu", connection=redis).enqueue_call("worker.tasks.run_predictions", args=(Payload(marker),))  # pickle

    run_queued_jobs(redis)

    assert not marker.exists()


def test_a_json_job_naming_another_function_is_refused(redis, tmp_path):
    marker = tmp_path / "pwned"
    job = rq_queue(redis, "cpu").enqueue_call(f"{__name__}.mark", args=[str(marker)])

    run_queued_jobs(redis)

    assert not marker.exists()
    assert job.get_status(refresh=True) == "failed"
    assert "not an Understudy job function" in (job.latest_result().exc_string or "")


def test_compose_has_no_default_password_and_redis_requires_one():
    compose = (REPO / "docker-compose.yml").read_text()

    assert not re.search(r"PASSWORD:-", compose), "a default password"
    assert "requirepass" in compose
    assert "redis://:${REDIS_PASSWORD" in compose


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_documentation_pages_load_only_from_this_service(client, page):
    answer = client.get(page)

    assert answer.status_code == 200
    sources = re.findall(r'(?:src|href)="([^"]+)"', answer.text)
    assert sources and all(source.startswith("/") for source in sources), sources
    assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
    for source in sources:
        assert client.get(source).status_code == 200, source
