"""Dependencies as type aliases: a handler declares `session: SessionDep` and gets one.

FastAPI runs a plain `def` dependency in its thread pool, one hand-off per dependency per request, and those
hand-offs were a fifth of the API's CPU on a cache hit (benchmarks/load/REPORT.md). So every dependency here that
does no blocking I/O is `async def` and runs on the event loop; the session is made there too (it connects at its
first statement, in the handler's thread). Its close returns the connection (I/O): a handler that closes it itself
(`with session:`) does that in its own thread; otherwise get_db does it in one more hand-off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from redis import Redis
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.db import new_session, redis_for
from app.auth import NO_KEY
from app.errors import Forbidden
from app.limits import settings_of
from app.security import Caller


async def current_settings(request: Request) -> Settings:
    """get_settings(), or what a test put in its place with app.dependency_overrides[get_settings]."""
    return settings_of(request.scope)


SettingsDep = Annotated[Settings, Depends(current_settings)]


async def get_db(settings: SettingsDep) -> AsyncIterator[Session]:
    session = new_session(settings)
    try:
        yield session
    finally:
        if session.in_transaction():
            # It still holds a connection, and handing that back to the pool is a ROLLBACK round trip: in a thread.
            await run_in_threadpool(session.close)
        else:
            # Committed, or closed by the handler in its own thread (`with session:`, the cache hits' handlers): no
            # I/O left, so no hand-off, which costs about 1 ms of CPU (benchmarks/load/REPORT.md).
            session.close()


async def get_redis(settings: SettingsDep) -> Redis:
    return redis_for(settings.redis_url)  # made once per URL; it connects at its first command


SessionDep = Annotated[Session, Depends(get_db)]
RedisDep = Annotated[Redis, Depends(get_redis)]

api_key_header = APIKeyHeader(
    name="X-API-Key", auto_error=False,
    description="a key from `understudy keys create`; a key sees the rows it made, an admin key every row",
)


def _caller(request: Request, needed: bool) -> Caller | None:
    """The caller app.auth.ApiKeyGate found in the headers before the body was read."""
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None and needed:
        raise NO_KEY
    return caller


async def require_write_key(request: Request, settings: SettingsDep,
                            token: Annotated[str | None, Security(api_key_header)]) -> Caller | None:
    return _caller(request, settings.require_api_key)


async def require_read_key(request: Request, settings: SettingsDep,
                           token: Annotated[str | None, Security(api_key_header)]) -> Caller | None:
    return _caller(request, settings.read_requires_key)


async def require_admin(caller: Annotated[Caller | None, Depends(require_read_key)]) -> Caller:
    if caller is None or not caller.admin:
        raise Forbidden("this needs an admin key (`understudy keys create --admin`)")
    return caller


WriteKeyDep = Annotated[Caller | None, Depends(require_write_key)]
ReadKeyDep = Annotated[Caller | None, Depends(require_read_key)]
AdminDep = Annotated[Caller, Depends(require_admin)]
