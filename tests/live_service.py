"""A running Understudy service for the tests that talk HTTP to it (tests/client, tests/dashboard, tests/populations).

`live_service(tag)` brings up, for one test package: a schema of its own in the real test Postgres (migrated with
Alembic), a Redis database of its own, an API key, and the API itself (uvicorn in a subprocess on a free port).
`LiveService.start_worker()` adds a worker process (rq's SimpleWorker on the "cpu" queue, in a subprocess) that runs
the analytic estimator; pause_workers() freezes it (SIGSTOP) so that a test can watch jobs wait in the queue.
register_gpu_host() adds a GPU host to the ledger with no process behind it (the GPU is the only fake), and
land_measurement() writes the measurement its job would.
Everything is torn down at the end: processes stopped, schema dropped, Redis flushed.

TEST_DATABASE_URL names the database (default postgresql+psycopg://root@127.0.0.1:5432/test); TEST_LIVE_REDIS_URL
the Redis database (default redis://127.0.0.1:6379/13, apart from the service tests' 15).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from redis import Redis
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from ledger import predictions
from ledger.models import Host, Prediction, utcnow
from understudy.results import PredictionResult, Status

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "postgresql+psycopg://root@127.0.0.1:5432/test")
LIVE_REDIS_URL = os.environ.get("TEST_LIVE_REDIS_URL", "redis://127.0.0.1:6379/13")
GPU_FINGERPRINT = "f00dfeedf00dfeed"  # register_gpu_host's host
# api_keys stay: the service's key lives there
TABLES = ("populations", "calibrations", "prediction_owners", "predictions", "hosts")

WORKER_CODE = """
import os
from redis import Redis
from rq import SimpleWorker
from ledger.dispatch import rq_queue
from ledger.jobs import SERIALIZER, AllowListedJob
redis = Redis.from_url(os.environ["REDIS_URL"])
SimpleWorker([rq_queue(redis, "cpu")], connection=redis, serializer=SERIALIZER, job_class=AllowListedJob).work(
    burst=False, with_scheduler=False)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def schema_url(url: str, schema: str) -> str:
    """The URL with every connection's search_path set to one schema."""
    parsed = make_url(url)
    return parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


def ensure_database(url: str) -> None:
    try:
        create_engine(url).connect().close()
    except OperationalError as exc:
        if "does not exist" not in str(exc):
            raise
        admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{make_url(url).database}"'))
        admin.dispose()


def migrate(url: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config(str(REPO / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


@contextmanager
def migrated_schema(schema: str, database_url: str = TEST_DATABASE_URL) -> Iterator[str]:
    """A schema of our own in the test database, brought up by the migrations and dropped on exit; yields a URL
    whose connections use it. The admin connection is checked before use: fault tests restart PostgreSQL."""
    ensure_database(database_url)
    admin = create_engine(database_url, pool_pre_ping=True)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = schema_url(database_url, schema)
        migrate(url)
        yield url
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@dataclass
class LiveService:
    url: str
    env: dict[str, str]
    db: Engine
    redis: Redis
    api_key: str
    logs: Path
    process: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_worker(self) -> subprocess.Popen[bytes]:
        """A worker process for the "cpu" queue (the analytic estimator), running until the package ends."""
        log = open(self.logs / f"worker-{len(self.workers)}.log", "wb")  # noqa: SIM115 (closed with the process)
        worker = subprocess.Popen([sys.executable, "-c", WORKER_CODE], env=self.env, cwd=REPO, stdout=log,
                                  stderr=subprocess.STDOUT)
        self.workers.append(worker)
        return worker

    def pause_workers(self) -> None:
        """Freeze the workers (SIGSTOP): jobs stay queued until resume_workers(), and torch stays loaded."""
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGSTOP)

    def resume_workers(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGCONT)

    def ensure_worker(self) -> None:
        """One running worker (started if there is none, thawed if paused)."""
        self.workers = [worker for worker in self.workers if worker.poll() is None]
        if self.workers:
            self.resume_workers()
        else:
            self.start_worker()

    def stop_workers(self) -> None:
        self.resume_workers()  # a stopped process would not act on SIGTERM
        for worker in self.workers:
            stop(worker)
        self.workers.clear()

    def clean(self) -> None:
        """Empty the tables (the API key stays) and the queues."""
        with self.db.begin() as connection:
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)}"))
        for key in self.redis.scan_iter("rq:queue:*"):
            self.redis.delete(key)

    def register_gpu_host(self) -> None:
        """A GPU worker in the hosts table (GPU_FINGERPRINT), so that GPU estimators are accepted; no process runs
        it: land_measurement() writes what its jobs would."""
        with Session(self.db) as session:
            session.add(Host(id="gpubox:gpu0", host_class=f"gpu:{GPU_FINGERPRINT}", gpu_name="NVIDIA H200",
                             fingerprint=GPU_FINGERPRINT, last_heartbeat=utcnow(),
                             info={"estimators": {"hostaware": {"version": "1", "needs_gpu": True}}}))
            session.commit()

    def land_measurement(self, prediction_id: str, latency_ms: float) -> None:
        """The registered GPU host's measurement of a row, written as its job would (ledger.predictions.finish)."""
        with Session(self.db) as session:
            row = session.get(Prediction, prediction_id)
            assert row is not None
            assert predictions.finish(session, prediction_id, PredictionResult(
                workload_digest=row.workload_digest, target_id=row.target_id, estimator=row.estimator,
                estimator_version=row.estimator_version, status=Status.done, latency_ms=latency_ms,
                median_ms=latency_ms, spread_ms=0.0, samples_per_s=row.workload["batch_size"] / latency_ms * 1000,
                host_fingerprint=GPU_FINGERPRINT))
            session.commit()

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")):
            text_ = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text_))
        return "\n".join(out)


@pytest.fixture
def live(service: LiveService) -> Iterator[LiveService]:
    """The package's service (each package that imports this fixture defines its own `service`) with empty tables
    and queues and a worker process running; pause_workers() holds the worker until the test ends."""
    service.ensure_worker()
    service.clean()
    yield service
    service.resume_workers()


def stop(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)


@contextmanager
def live_service(tag: str, **extra_env: str) -> Iterator[LiveService]:
    """The API on a free port over a fresh schema and Redis database; torn down on exit."""
    with migrated_schema(f"live_{tag}_{os.getpid()}_{uuid.uuid4().hex[:6]}") as url:
        yield from _serve(tag, url, extra_env)


def _serve(tag: str, url: str, extra_env: dict[str, str]) -> Iterator[LiveService]:
    """live_service's API over a schema already migrated, with its Redis database, its key and its process."""
    from app.security import create_api_key

    redis = Redis.from_url(LIVE_REDIS_URL)
    redis.flushdb()
    db = create_engine(url)
    logs = Path(tempfile.mkdtemp(prefix=f"understudy-live-{tag}-"))
    process = None
    service = None
    try:
        with Session(db) as session:
            _, token = create_api_key(session=session, name=f"live-{tag}")
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": LIVE_REDIS_URL,
            "UNDERSTUDY_REQUIRE_API_KEY": "true",
            "UNDERSTUDY_READ_REQUIRES_KEY": "false",
            # Its worker is a plain rq worker, which registers no host: requests must not wait for one.
            "UNDERSTUDY_REQUIRE_LIVE_WORKER": "false",
            "UNDERSTUDY_RECONCILE_INTERVAL_S": "0",
            "UNDERSTUDY_HOST_NAME": f"live-{tag}",
            "UNDERSTUDY_JOB_TIMEOUT_S": "120",
            # The tests empty the tables under the running API (LiveService.clean): it must not answer from memory.
            "UNDERSTUDY_REMEMBER_FINISHED_S": "0",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        log = open(logs / "api.log", "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        service = LiveService(url=f"http://127.0.0.1:{port}", env=env, db=db, redis=redis, api_key=token, logs=logs,
                              process=process)

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the API exited with {process.returncode}:\n{service.log_tail()}")
            try:
                return httpx.get(f"{service.url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 30, "the API to answer /readyz", interval_s=0.1)
        yield service
    finally:
        if service is not None:
            service.stop_workers()
        if process is not None:
            stop(process)
        db.dispose()
        redis.flushdb()
        redis.close()
