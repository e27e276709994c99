"""What the fault tests share: the real API and workers in subprocesses, and stopping and starting the tests' own
PostgreSQL and Redis (tests/faults/stores.py; always started again and answering before a test ends)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from tests import live_service, waiting
from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.models import Prediction

from .stores import PrivateStores, free_port

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FAKE_GPU = Path(__file__).resolve().parent / "fakegpu"
SLOWJOB = TESTS / "service" / "slowjob"

# The API and workers of these tests look for lost rows every second and count a row as lost one second after it was
# queued: what the reconciler does in an hour of production happens within a test.
FAST_RECONCILE = {"UNDERSTUDY_RECONCILE_INTERVAL_S": "1", "UNDERSTUDY_RECONCILE_GRACE_S": "1"}


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.1) -> Any:
    """tests.waiting.wait_for, where a condition that raises is not true yet: a store that is coming back raises for
    a while."""
    return waiting.wait_for(condition, timeout_s, what, interval_s=poll_s, tolerate=(Exception,))


def start_worker(*args: str, env: dict[str, str] | None = None, paths: tuple[Path, ...] = ()) -> subprocess.Popen:
    """`understudy worker --gpu 0` with the test's environment, `env` on top and `paths` first on PYTHONPATH."""
    merged = {**os.environ, **(env or {})}
    if paths:
        merged["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *filter(None, [merged.get("PYTHONPATH")])])
    return subprocess.Popen([sys.executable, "-m", "cli.main", "worker", "--gpu", "0", *args], env=merged,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop(process: subprocess.Popen, timeout_s: float = 20) -> str:
    """Stop a process we started (SIGTERM, then SIGKILL) and return what it printed."""
    live_service.stop(process, timeout_s)
    output, _ = process.communicate(timeout=10)
    return output or ""


@contextmanager
def api_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """`understudy serve` on a free loopback port; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--log-level", "warning"],
        env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: process.poll() is not None or httpx.get(f"{url}/healthz", timeout=1).status_code == 200,
                 60, "the API to answer")
        assert process.poll() is None, stop(process)
        yield url
    finally:
        output = stop(process)
        assert "Traceback" not in output, output[-4000:]


def status_of(db: Any, ids: list[str]) -> dict[str, str]:
    with Session(db) as session:
        return dict(session.execute(select(Prediction.id, Prediction.status).where(Prediction.id.in_(ids))).all())


def restart_redis(stores: PrivateStores) -> None:
    """Shut the tests' Redis down without saving (everything in it is lost, as in a crash) and start it again."""
    try:
        stores.redis.stop()
    finally:
        stores.redis.start()


@contextmanager
def postgres_stopped(stores: PrivateStores) -> Iterator[None]:
    """The tests' PostgreSQL stopped for the body, started again (and answering) however the body ends."""
    try:
        stores.postgres.stop()
        yield
    finally:
        stores.postgres.start()


def start_postgres_and_redis(stores: PrivateStores) -> None:
    stores.postgres.start()
    stores.redis.start()
