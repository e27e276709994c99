"""Dependencies as type aliases: a handler declares `session: SessionDep` and gets one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from redis import Redis
from sqlalchemy.orm import Session

from app.core.config import Settings, get_settings
from app.core.db import redis_for, session_for
from app.auth import NO_KEY
from app.errors import Forbidden
from app.security import Caller

SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_db(settings: SettingsDep) -> Iterator[Session]:
    yield from session_for(settings)


def get_redis(settings: SettingsDep) -> Redis:
    return redis_for(settings.redis_url)


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


def require_write_key(request: Request, settings: SettingsDep,
                      token: Annotated[str | None, Security(api_key_header)]) -> Caller | None:
    return _caller(request, settings.require_api_key)


def require_read_key(request: Request, settings: SettingsDep,
                     token: Annotated[str | None, Security(api_key_header)]) -> Caller | None:
    return _caller(request, settings.read_requires_key)


def require_admin(caller: Annotated[Caller | None, Depends(require_read_key)]) -> Caller:
    if caller is None or not caller.admin:
        raise Forbidden("this needs an admin key (`understudy keys create --admin`)")
    return caller


WriteKeyDep = Annotated[Caller | None, Depends(require_write_key)]
ReadKeyDep = Annotated[Caller | None, Depends(require_read_key)]
AdminDep = Annotated[Caller, Depends(require_admin)]
