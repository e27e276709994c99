"""Fixtures for the abuse tests: the service tests' real PostgreSQL and Redis, app, client and key
(tests/service/conftest.py), and a check that nothing reached the queue."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from redis import Redis
from tests.service.conftest import api_key, app, auth, clean, client, db, redis, service_env, settings  # noqa: F401 - fixtures
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from ledger.models import Prediction


@pytest.fixture
def nothing_queued(db: Engine, redis: Redis) -> Callable[[], None]:
    """Asserts that no job reached Redis and no row the ledger."""

    def check() -> None:
        queues = [key.decode() for key in redis.keys("rq:queue:*")]
        assert [name for name in queues if redis.llen(name)] == [], queues
        with Session(db) as session:
            assert session.scalar(select(func.count()).select_from(Prediction)) == 0

    return check
