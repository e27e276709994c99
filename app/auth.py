"""The API key gate: who is asking, decided from the X-API-Key header before any body is read.

FastAPI reads and validates a request's body before it resolves the route's dependencies, so a key checked in a
dependency comes too late: a caller without a key could still make the API read and parse a large body. This ASGI
middleware answers 401 first, from the headers alone, and leaves the caller it found in the request's state
(`request.state.caller`) for the routes.

A key's lookup is remembered for CACHE_S (by the sha256 of the token, never the token), so the hot path (a cached
answer polled again and again) costs no database round trip. A key revoked through the API is forgotten at once by
the process that revoked it; every other process (another uvicorn worker, `understudy keys revoke`) stops accepting
it within CACHE_S.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.db import db_engine
from app.errors import ServiceUnavailable, Unauthorized
from app.limits import API_KEY_HEADER, WRITE_METHODS, answer, header, settings_of
from app.security import Caller, authenticate
from understudy.settings import Settings

CACHE_S = 5.0
CACHE_ENTRIES = 10_000
# Only the API's resources are gated; health checks, the dashboard's page and the docs are open.
GATED_PREFIX = "/v1/"

NO_KEY = Unauthorized("this needs an API key in the X-API-Key header (`understudy keys create` makes one)")
BAD_KEY = Unauthorized("the API key in X-API-Key is unknown or revoked")


def _lookup(settings: Settings, token: str) -> Caller | None:
    with Session(db_engine(settings)) as session:
        key = authenticate(session=session, token=token)
        return Caller.of(key) if key is not None else None


class KnownKeys:
    """Lookups of presented tokens, each good for CACHE_S: the caller a token belongs to, or None for an unknown one."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, Caller | None]] = {}  # sha256 of the token -> (when, caller)

    def get(self, digest: str) -> tuple[bool, Caller | None]:
        """(found, caller): found is False when this token was never looked up or its lookup is too old."""
        hit = self._known.get(digest)
        if hit is None or time.monotonic() - hit[0] >= CACHE_S:
            return False, None
        return True, hit[1]

    def put(self, digest: str, caller: Caller | None, asked_at: float) -> None:
        """Remember a lookup from the moment it was asked (time.monotonic()), not answered: CACHE_S bounds how old
        the database's answer can be."""
        if len(self._known) >= CACHE_ENTRIES:
            self._known.clear()  # guessed keys must not grow the process without bound
        self._known[digest] = (asked_at, caller)

    def forget(self, key_id: str) -> None:
        """Drop every lookup that found this key (its revocation takes effect in this process at once)."""
        for digest, (_, caller) in list(self._known.items()):
            if caller is not None and caller.key_id == key_id:
                self._known.pop(digest, None)  # the gate may have cleared it meanwhile (another thread)


# One per process: the gate fills it, the revoking route (app/api/routes/keys.py) empties it of a revoked key.
known_keys = KnownKeys()


class ApiKeyGate:
    """Refuse a request that needs a key and has none (or an unknown one) with 401, before its body is read."""

    def __init__(self, app: ASGIApp, known: KnownKeys = known_keys) -> None:
        self.app = app
        self.known = known

    async def caller(self, settings: Settings, token: str) -> Caller | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        found, caller = self.known.get(digest)
        if found:
            return caller
        asked_at = time.monotonic()
        caller = await asyncio.to_thread(_lookup, settings, token)
        self.known.put(digest, caller, asked_at)
        return caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GATED_PREFIX):
            await self.app(scope, receive, send)
            return
        settings = settings_of(scope)
        raw = header(scope, API_KEY_HEADER)
        needed = settings.require_api_key if scope["method"] in WRITE_METHODS else settings.read_requires_key
        caller = None
        if raw:
            try:
                caller = await self.caller(settings, raw.decode("latin-1"))
            except SQLAlchemyError:
                await answer(ServiceUnavailable("the database is unavailable; try again shortly"), scope, receive,
                             send)
                return
            if caller is None:
                await answer(BAD_KEY, scope, receive, send)
                return
        elif needed:
            await answer(NO_KEY, scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)
