"""Dependencies as type aliases: a handler declares `session: SessionDep` and gets one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Security
from fastapi.security import APIKeyHeader
from redis import Redis
from sqlalchemy.orm import Session

from app.core.config import Settings, get_settings
from app.core.db import redis_for, session_for
from app.errors import Unauthorized
from app.security import authenticate
from ledger.models import ApiKey

SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_db(settings: SettingsDep) -> Iterator[Session]:
    yield from session_for(settings)


def get_redis(settings: SettingsDep) -> Redis:
    return redis_for(settings.redis_url)


SessionDep = Annotated[Session, Depends(get_db)]
RedisDep = Annotated[Redis, Depends(get_redis)]

api_key_header = APIKeyHeader(
    name="X-API-Key", auto_error=False,
    description="a key from `understudy keys create`; writes need one, reads only if UNDERSTUDY_READ_REQUIRES_KEY",
)


def _check_key(session: Session, token: str | None) -> ApiKey:
    if not token:
        raise Unauthorized("this needs an API key in the X-API-Key header (`understudy keys create` makes one)")
    key = authenticate(session=session, token=token)
    if key is None:
        raise Unauthorized("the API key in X-API-Key is unknown or revoked")
    return key


def require_write_key(settings: SettingsDep, session: SessionDep,
                      token: Annotated[str | None, Security(api_key_header)]) -> ApiKey | None:
    return _check_key(session, token) if settings.require_api_key else None


def require_read_key(settings: SettingsDep, session: SessionDep,
                     token: Annotated[str | None, Security(api_key_header)]) -> ApiKey | None:
    return _check_key(session, token) if settings.read_requires_key else None


WriteKeyDep = Annotated[ApiKey | None, Depends(require_write_key)]
ReadKeyDep = Annotated[ApiKey | None, Depends(require_read_key)]
