"""Database sessions and the Redis connection for the API. Nothing connects until a request asks."""

from __future__ import annotations

from functools import lru_cache

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from understudy.settings import Settings
from ledger.db import get_engine


def db_engine(settings: Settings) -> Engine:
    return get_engine(settings.database_url)


@lru_cache(maxsize=8)
def _factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(get_engine(url), expire_on_commit=False)


def new_session(settings: Settings) -> Session:
    """A session that has not connected yet (it takes a pooled connection at its first statement): cheap to make
    on the event loop."""
    return _factory(settings.database_url)()


@lru_cache(maxsize=8)
def redis_for(url: str) -> Redis:
    # Short timeouts and two quick retries (redis-py's default is ten with backoff): an unreachable Redis must turn
    # into a 503 within a second, not a hung request.
    return Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5, health_check_interval=30,
                          retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 2))
