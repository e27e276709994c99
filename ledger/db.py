"""Engines and sessions. Nothing connects at import time: callers ask for an engine with a URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

from ledger.models import Base


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return create_engine(url, connect_args={"check_same_thread": False})
    # A short connect timeout: an unreachable database must become a 503 quickly, not a hung request.
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, pool_timeout=10,
                         connect_args={"connect_timeout": 5})


def init_sqlite(url: str) -> Engine:
    """The one-shot CLI's SQLite database, created on first use (the service uses Alembic migrations instead)."""
    engine = get_engine(url)
    Base.metadata.create_all(engine)
    return engine


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    factory = sessionmaker(engine, expire_on_commit=False)
    with factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
