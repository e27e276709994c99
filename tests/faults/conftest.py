"""Fixtures for the fault tests: the service tests' real PostgreSQL and Redis (tests/service/conftest.py), and the
worker processes a test starts, stopped afterwards whatever happened."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from tests.live_service import migrated_schema
from tests.service.conftest import api_key, app, auth, clean, client, redis, service_env, settings  # noqa: F401
from tests.service.helpers import SCHEMA
from sqlalchemy import Engine

from .helpers import start_postgres_and_redis, stop


@pytest.fixture(scope="package")
def db(service_env: dict[str, str]) -> Iterator[Engine]:
    """tests/service's schema of our own, brought up by the migrations; PostgreSQL is started again before the
    schema is dropped, since these tests stop it."""
    from ledger.db import get_engine

    with migrated_schema(SCHEMA) as url:
        engine = get_engine(url)
        yield engine
        engine.dispose()
        start_postgres_and_redis()


@pytest.fixture(autouse=True)
def stores_answer() -> Iterator[None]:
    """Whatever a test did to PostgreSQL or Redis, both answer again before the next test."""
    yield
    start_postgres_and_redis()


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        stop(process)
