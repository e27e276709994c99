"""Fixtures for the fault tests: a PostgreSQL cluster and a Redis server of their own (tests/faults/stores.py),
which the tests stop and restart; the service tests' app, client and API key fixtures, pointed at them; and the
worker processes a test starts, stopped afterwards whatever happened."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from redis import Redis
from sqlalchemy import Engine

from tests.live_service import migrated_schema, schema_url
from tests.service.conftest import api_key, app, auth, clean, client, settings  # noqa: F401 - shared fixtures
from tests.service.helpers import SCHEMA, SERVICE_ENV, service_environment

from .helpers import start_postgres_and_redis, stop
from .stores import PrivateStores


@pytest.fixture(scope="package")
def stores() -> Iterator[PrivateStores]:
    made = PrivateStores.create()
    yield made
    made.remove()


@pytest.fixture(scope="package")
def service_env(stores: PrivateStores) -> Iterator[dict[str, str]]:
    """The service tests' environment with the private stores' URLs; restored afterwards."""
    env = {**SERVICE_ENV, "REDIS_URL": stores.redis.url, "DATABASE_URL": schema_url(stores.postgres.url, SCHEMA)}
    with service_environment(env):
        yield env


@pytest.fixture(scope="package")
def db(service_env: dict[str, str], stores: PrivateStores) -> Iterator[Engine]:
    """A schema of our own in the private cluster, brought up by the migrations."""
    from ledger.db import get_engine

    with migrated_schema(SCHEMA, stores.postgres.url) as url:
        engine = get_engine(url)
        yield engine
        engine.dispose()
        start_postgres_and_redis(stores)


@pytest.fixture
def redis(service_env: dict[str, str], stores: PrivateStores) -> Iterator[Redis]:
    connection = Redis.from_url(stores.redis.url)
    connection.flushdb()
    yield connection
    connection.flushdb()
    connection.close()


@pytest.fixture(autouse=True)
def stores_answer(stores: PrivateStores) -> Iterator[None]:
    """Whatever a test did to PostgreSQL or Redis, both answer again before the next test."""
    yield
    start_postgres_and_redis(stores)


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        stop(process)
