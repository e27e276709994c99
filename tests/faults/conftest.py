"""Fixtures for the fault tests: the service tests' real PostgreSQL and Redis (tests/service/conftest.py), and the
worker processes a test starts, stopped afterwards whatever happened."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from live_service import migrate
from service.conftest import (api_key, app, auth, clean, client, ensure_database, redis,  # noqa: F401
                              service_env, settings)
from service.helpers import SCHEMA, TEST_DATABASE_URL
from sqlalchemy import Engine, create_engine, text

from .helpers import start_postgres_and_redis, stop


@pytest.fixture(scope="package")
def db(service_env: dict[str, str]) -> Iterator[Engine]:
    """tests/service's schema of our own, brought up by the migrations, with every connection checked before use:
    these tests restart PostgreSQL, which ends every connection a pool holds."""
    from understudy.store.db import get_engine

    ensure_database(TEST_DATABASE_URL)
    admin = create_engine(TEST_DATABASE_URL, pool_pre_ping=True)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{SCHEMA}"'))
    migrate(service_env["DATABASE_URL"])
    engine = get_engine(service_env["DATABASE_URL"])
    yield engine
    engine.dispose()
    start_postgres_and_redis()
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{SCHEMA}" CASCADE'))
    admin.dispose()


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
