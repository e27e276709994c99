"""Fixtures for the service tests: the real PostgreSQL (a schema of its own, tables truncated per test), the real
Redis (database 15, flushed before and after each test), the app under TestClient, an API key, and a way to run the
queued jobs (helpers.run_queued_jobs: rq's SimpleWorker, in this process).

TEST_DATABASE_URL names the database (default postgresql+psycopg://root@127.0.0.1:5432/test); TEST_REDIS_URL the
Redis database (default redis://127.0.0.1:6379/15).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis import Redis
from sqlalchemy import Engine, text

from tests.live_service import migrated_schema, schema_url

from .helpers import SCHEMA, SERVICE_ENV, TABLES, TEST_DATABASE_URL, TEST_REDIS_URL, service_environment


@pytest.fixture(scope="package")
def service_env() -> Iterator[dict[str, str]]:
    """The environment of this package's tests; restored afterwards so other test packages never see it."""
    env = {**SERVICE_ENV, "DATABASE_URL": schema_url(TEST_DATABASE_URL, SCHEMA)}
    with service_environment(env):
        yield env


@pytest.fixture(scope="package")
def db(service_env: dict[str, str]) -> Iterator[Engine]:
    """A schema of our own in the test database, brought up by the migrations, dropped at the end."""
    from ledger.db import get_engine

    with migrated_schema(SCHEMA) as url:
        engine = get_engine(url)
        yield engine
        engine.dispose()


@pytest.fixture(scope="package")
def settings(service_env: dict[str, str], db: Engine) -> Any:
    from understudy.settings import get_settings

    return get_settings()


@pytest.fixture
def redis(service_env: dict[str, str]) -> Iterator[Redis]:
    connection = Redis.from_url(TEST_REDIS_URL)
    connection.flushdb()
    yield connection
    connection.flushdb()
    connection.close()


@pytest.fixture(autouse=True)
def clean(db: Engine, redis: Redis) -> Iterator[None]:
    """Every test starts with empty tables and an empty Redis database."""
    with db.begin() as connection:
        connection.execute(text(f"TRUNCATE {', '.join(TABLES)} CASCADE"))
    yield


@pytest.fixture
def app(settings: Any) -> Iterator[Any]:
    from app.main import app as the_app

    yield the_app
    the_app.dependency_overrides.clear()


@pytest.fixture
def client(app: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def api_key(db: Engine) -> str:
    from sqlalchemy.orm import Session

    from app.security import create_api_key

    with Session(db) as session:
        _, token = create_api_key(session=session, name="tests")
    return token


@pytest.fixture
def auth(api_key: str) -> dict[str, str]:
    return {"X-API-Key": api_key}
