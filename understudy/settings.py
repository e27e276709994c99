"""Settings from the environment, in one object (pydantic-settings). Nothing here connects to anything."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_sqlite_url() -> str:
    path = Path.home() / ".cache" / "understudy" / "predictions.sqlite"
    return f"sqlite:///{path}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    database_url: str = Field(default_factory=default_sqlite_url, alias="DATABASE_URL")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", alias="REDIS_URL")
    # Writes need a key unless this is off; reads are open unless read_requires_key.
    require_api_key: bool = Field(default=True, alias="UNDERSTUDY_REQUIRE_API_KEY")
    read_requires_key: bool = Field(default=False, alias="UNDERSTUDY_READ_REQUIRES_KEY")
    worker_gpu: int = Field(default=0, ge=0, alias="UNDERSTUDY_WORKER_GPU")
    job_timeout_s: int = Field(default=1800, ge=1, alias="UNDERSTUDY_JOB_TIMEOUT_S")
    # Locking the core clock changes a shared card's state: only where the operator says so.
    allow_clock_lock: bool = Field(default=False, alias="UNDERSTUDY_ALLOW_CLOCK_LOCK")
    sm_mechanism: str = Field(default="green-context", alias="UNDERSTUDY_SM_MECHANISM")
    mps_control: str = Field(default="nvidia-cuda-mps-control", alias="UNDERSTUDY_MPS_CONTROL")
    timed_windows: int = Field(default=10, ge=1, le=100, alias="UNDERSTUDY_TIMED_WINDOWS")
    window_ms: float = Field(default=50.0, gt=0, alias="UNDERSTUDY_WINDOW_MS")
    max_body_bytes: int = Field(default=64 * 1024, alias="UNDERSTUDY_MAX_BODY_BYTES")

    @field_validator("database_url")
    @classmethod
    def _normalise_postgres(cls, value: str) -> str:
        # SQLAlchemy's plain postgresql:// means psycopg2, which is not installed; we ship psycopg 3.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
