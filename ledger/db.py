"""Engines and sessions. Nothing connects at import time: callers ask for an engine with a URL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
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
    with engine.begin() as connection:
        # Python's sqlite3 runs DDL outside any transaction, so each CREATE would be a commit of its own, each
        # waiting on the disk (a third of a second for a new file). One transaction commits the tables at once, and
        # IMMEDIATE takes the write lock before the existence checks, so two first runs cannot race to create them.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        Base.metadata.create_all(connection)
        add_missing_columns(connection)
    return engine


def add_missing_columns(connection: Connection) -> None:
    """Add, empty, the columns a cache file made by an earlier version lacks (every column added since the first
    release is nullable: predictions.estimate), so the ORM's reads and writes find them."""
    inspector = inspect(connection)
    for table in Base.metadata.sorted_tables:
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present:
                kind = column.type.compile(dialect=connection.dialect)
                connection.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}')


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


SERVICE_SETUP = "README, \"Running the service\""


def connection_problem(database_url: str, error: BaseException) -> str:
    """What is wrong with a database that refused a connection, and what to do, in one line: no such role, no such
    database, a refused password, or no server at all. `error` is the driver's error (psycopg's
    OperationalError, or SQLAlchemy's wrapping it)."""
    reason = str(getattr(error, "orig", None) or error).strip()
    try:
        url = make_url(database_url)
        role, name, place = url.username or "(none)", url.database or "(none)", f"{url.host}:{url.port or 5432}"
    except ArgumentError:
        role, name, place = "(none)", "(none)", "(unknown)"
    if re.search(r'role "[^"]*" does not exist', reason):
        return (f"PostgreSQL at {place} has no role {role!r} (the user in DATABASE_URL): create it as a superuser, "
                f"e.g. psql -c \"CREATE ROLE {role} LOGIN PASSWORD '...'\" ({SERVICE_SETUP})")
    if re.search(r'database "[^"]*" does not exist', reason):
        return (f"PostgreSQL at {place} has no database {name!r} (DATABASE_URL): create it, e.g. "
                f"createdb --owner {role} {name}, then run `alembic upgrade head` ({SERVICE_SETUP})")
    if "password authentication failed" in reason or "no password supplied" in reason:
        return (f"PostgreSQL at {place} refused role {role!r}: give its password in DATABASE_URL "
                f"(postgresql://{role}:PASSWORD@{place}/{name})")
    if server_unreachable(error):
        return f"nothing answers at {place} (DATABASE_URL): is PostgreSQL running there? ({reason.splitlines()[0]})"
    return f"cannot reach the database (DATABASE_URL): {reason}"


def server_unreachable(error: BaseException) -> bool:
    """Whether a connection failed for want of a server (not running, starting, unreachable), which waiting can
    cure, rather than because the server refused it."""
    reason = str(getattr(error, "orig", None) or error)
    refusals = ("does not exist", "password authentication failed", "no password supplied", "no pg_hba.conf entry")
    return not any(refusal in reason for refusal in refusals)


NOT_MIGRATED = ("the database has no Understudy tables yet: run `alembic upgrade head` (or start the API with "
                "`understudy serve --migrate`)")
