"""Settings from the environment, in one object (pydantic-settings). Nothing here connects to anything."""

from __future__ import annotations

import os
import socket
import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_run_dir() -> str:
    return str(Path(tempfile.gettempdir()) / f"understudy-{os.getuid() if hasattr(os, 'getuid') else 'user'}")


def default_cache_dir() -> str:
    return str(Path.home() / ".cache" / "understudy")


def default_sqlite_url() -> str:
    path = Path(default_cache_dir()) / "predictions.sqlite"
    return f"sqlite:///{path}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    database_url: str = Field(default_factory=default_sqlite_url, alias="DATABASE_URL")
    # Where `understudy predict` remembers its host probe (engine.probe.remembered_host), so that a cached answer
    # needs no torch.
    cache_dir: str = Field(default_factory=default_cache_dir, alias="UNDERSTUDY_CACHE_DIR")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", alias="REDIS_URL")
    # Writes and reads need a key unless these are off. A key sees its own rows (an admin key every row); a reader
    # without a key, where reads are open, sees every row.
    require_api_key: bool = Field(default=True, alias="UNDERSTUDY_REQUIRE_API_KEY")
    read_requires_key: bool = Field(default=True, alias="UNDERSTUDY_READ_REQUIRES_KEY")
    worker_gpu: int = Field(default=0, ge=0, alias="UNDERSTUDY_WORKER_GPU")
    job_timeout_s: int = Field(default=1800, ge=1, alias="UNDERSTUDY_JOB_TIMEOUT_S")
    # Locking the core clock changes a shared card's state: only where the operator says so.
    allow_clock_lock: bool = Field(default=False, alias="UNDERSTUDY_ALLOW_CLOCK_LOCK")
    sm_mechanism: str = Field(default="green-context", alias="UNDERSTUDY_SM_MECHANISM")
    mps_control: str = Field(default="nvidia-cuda-mps-control", alias="UNDERSTUDY_MPS_CONTROL")
    timed_windows: int = Field(default=10, ge=1, le=100, alias="UNDERSTUDY_TIMED_WINDOWS")
    window_ms: float = Field(default=50.0, gt=0, alias="UNDERSTUDY_WINDOW_MS")
    # cuDNN's algorithm search before a workload's first step: the fastest algorithm per shape, at a one-off cost of
    # seconds per process (the search, and the kernels cuDNN compiles at run time for it).
    cudnn_benchmark: bool = Field(default=True, alias="UNDERSTUDY_CUDNN_BENCHMARK")
    max_body_bytes: int = Field(default=64 * 1024, alias="UNDERSTUDY_MAX_BODY_BYTES")

    # The service. The API listens here when started by `understudy serve`.
    api_host: str = Field(default="127.0.0.1", alias="UNDERSTUDY_API_HOST")
    api_port: int = Field(default=8000, ge=1, le=65535, alias="UNDERSTUDY_API_PORT")
    max_targets: int = Field(default=64, ge=1, le=1000, alias="UNDERSTUDY_MAX_TARGETS")
    # How a worker names its machine in the hosts table and its GPU lock (a container's hostname is random).
    host_name: str = Field(default_factory=socket.gethostname, alias="UNDERSTUDY_HOST_NAME")
    # A worker refreshes its GPU lock, its liveness key and its hosts row this often; the lock and liveness key
    # expire after lock_ttl_s without a refresh, so a killed worker frees its GPU after at most that long.
    heartbeat_s: float = Field(default=10.0, gt=0, alias="UNDERSTUDY_HEARTBEAT_S")
    lock_ttl_s: float = Field(default=30.0, gt=0, alias="UNDERSTUDY_LOCK_TTL_S")
    # A host whose last heartbeat is older than this is not offered for new GPU work.
    host_stale_s: float = Field(default=120.0, gt=0, alias="UNDERSTUDY_HOST_STALE_S")
    # The reconciler re-queues ledger rows that Redis lost; 0 turns the periodic runs off (a worker still runs it
    # once at start-up).
    reconcile_interval_s: float = Field(default=60.0, ge=0, alias="UNDERSTUDY_RECONCILE_INTERVAL_S")
    # A queued row younger than this is left alone: its request may be about to enqueue it.
    reconcile_grace_s: float = Field(default=30.0, ge=0, alias="UNDERSTUDY_RECONCILE_GRACE_S")
    # A row whose worker died this many times is failed instead of re-queued again.
    max_attempts: int = Field(default=3, ge=1, le=100, alias="UNDERSTUDY_MAX_ATTEMPTS")
    # How long rq keeps a finished or failed job's record (the ledger keeps the result for good).
    job_record_ttl_s: int = Field(default=24 * 3600, ge=1, alias="UNDERSTUDY_JOB_RECORD_TTL_S")
    # Writes (POST, PUT, PATCH, DELETE) allowed per fixed window, per API key and per client address; 0 turns a limit
    # off. Past a limit the API answers 429 with Retry-After (app/limits.py; the counters live in Redis).
    rate_limit_window_s: float = Field(default=60.0, gt=0, le=86_400, alias="UNDERSTUDY_RATE_LIMIT_WINDOW_S")
    rate_limit_per_key: int = Field(default=600, ge=0, alias="UNDERSTUDY_RATE_LIMIT_PER_KEY")
    rate_limit_per_ip: int = Field(default=1200, ge=0, alias="UNDERSTUDY_RATE_LIMIT_PER_IP")
    # Reads of /v1/... in the same windows, per key and per address.
    read_limit_per_key: int = Field(default=6000, ge=0, alias="UNDERSTUDY_READ_LIMIT_PER_KEY")
    read_limit_per_ip: int = Field(default=6000, ge=0, alias="UNDERSTUDY_READ_LIMIT_PER_IP")
    # How long an API process answers a finished prediction it has served from memory (app/finished.py; 0: never).
    remember_finished_s: float = Field(default=300.0, ge=0, alias="UNDERSTUDY_REMEMBER_FINISHED_S")
    # Admission control of uncached work (ledger/admission.py). Each key may queue this many estimated worker
    # seconds per window (0: no budget), and have this many jobs waiting at once; a queue holding max_queue_depth
    # jobs takes no more (503). Without a live worker on the chosen queue a request is refused (503) unless
    # require_live_worker is off (tests that run the jobs in their own process).
    work_budget_s: float = Field(default=1800.0, ge=0, alias="UNDERSTUDY_WORK_BUDGET_S")
    work_window_s: float = Field(default=600.0, gt=0, le=86_400, alias="UNDERSTUDY_WORK_WINDOW_S")
    max_waiting_jobs_per_key: int = Field(default=50, ge=0, alias="UNDERSTUDY_MAX_WAITING_JOBS_PER_KEY")
    # Fair scheduling: a key's jobs queued or running at once in one queue (0: no limit); rq holds back the rest.
    max_active_jobs_per_key: int = Field(default=1, ge=0, alias="UNDERSTUDY_MAX_ACTIVE_JOBS_PER_KEY")
    max_queue_depth: int = Field(default=2000, ge=0, alias="UNDERSTUDY_MAX_QUEUE_DEPTH")
    require_live_worker: bool = Field(default=True, alias="UNDERSTUDY_REQUIRE_LIVE_WORKER")

    # Where a worker keeps, per GPU, what its jobs leave running outside their own processes (MPS daemons), so that
    # the next worker on that GPU can stop what a killed one left behind.
    run_dir: str = Field(default_factory=default_run_dir, alias="UNDERSTUDY_RUN_DIR")

    @field_validator("database_url")
    @classmethod
    def _normalise_postgres(cls, value: str) -> str:
        # SQLAlchemy's plain postgresql:// means psycopg2, which is not installed; we ship psycopg 3.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value

    @model_validator(mode="after")
    def _lock_outlives_heartbeat(self) -> Settings:
        if self.lock_ttl_s <= self.heartbeat_s:
            raise ValueError("UNDERSTUDY_LOCK_TTL_S must be longer than UNDERSTUDY_HEARTBEAT_S, or a live worker "
                             "would lose its GPU lock between two heartbeats")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
