"""Limits on what one client can send: a body size cap (413) and write rate limits per API key and per client
address (429 with Retry-After). Both are plain ASGI middlewares, so a refused request costs no database round trip
and never reaches a route, let alone the queue.

The rate limits are fixed windows counted in Redis (one INCR per limit, in one script call), so every API process
shares them. Should Redis not answer, writes are let through: the limits protect the service, and a write that needs
the queue gets its own 503 anyway.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import weakref
from asyncio import AbstractEventLoop, get_running_loop
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import ApiError, PayloadTooLarge, TooManyRequests, api_error_response
from ledger.queues import KEY_PREFIX
from understudy.settings import Settings, get_settings

log = logging.getLogger("understudy.api")

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
API_KEY_HEADER = b"x-api-key"

# INCR each window counter, starting its window on the first hit; answer [count, ms left] per key.
_COUNT = """
local out = {}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCR', key)
  if n == 1 then redis.call('PEXPIRE', key, ARGV[1]) end
  local left = redis.call('PTTL', key)
  if left < 0 then redis.call('PEXPIRE', key, ARGV[1]); left = tonumber(ARGV[1]) end
  out[#out + 1] = n
  out[#out + 1] = left
end
return out
"""


def settings_of(scope: Scope) -> Settings:
    """The settings the routes see: the app's dependency override of get_settings when a test set one."""
    app = scope.get("app")
    overrides = getattr(app, "dependency_overrides", None) or {}
    return overrides.get(get_settings, get_settings)()


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value
    return None


async def _answer(exc: ApiError, scope: Scope, receive: Receive, send: Send) -> None:
    await api_error_response(exc)(scope, receive, send)


class BodySizeLimit:
    """Refuse request bodies over UNDERSTUDY_MAX_BODY_BYTES with 413: by their Content-Length before reading them,
    and, for chunked bodies that declare no length, once what arrived passes the limit."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings_of(scope).max_body_bytes
        too_large = PayloadTooLarge(f"the body is larger than {limit} bytes (UNDERSTUDY_MAX_BODY_BYTES)")
        length = _header(scope, b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > limit:
                await _answer(too_large, scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server reads no more than the declared length
            return
        if _header(scope, b"transfer-encoding") is None:
            await self.app(scope, receive, send)  # no body at all
            return
        # A chunked body: read it here (it is small or refused) and hand it on whole.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left; the app will see the disconnect
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await _answer(too_large, scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class WriteRateLimit:
    """Count writes per API key and per client address in fixed windows; past a limit, 429 with Retry-After."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # One asyncio client per event loop (a test's TestClient runs each app start in a loop of its own).
        self._clients: weakref.WeakKeyDictionary[AbstractEventLoop, dict[str, AsyncRedis]] = (
            weakref.WeakKeyDictionary())
        self._warned_at = 0.0

    def _redis(self, url: str) -> AsyncRedis:
        clients = self._clients.setdefault(get_running_loop(), {})
        if url not in clients:
            # Short timeouts and no retries: a slow Redis must not hold up every write.
            clients[url] = AsyncRedis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5, retry=None)
        return clients[url]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITE_METHODS:
            await self.app(scope, receive, send)
            return
        settings = settings_of(scope)
        refusal = await self.check(scope, settings)
        if refusal is not None:
            await _answer(refusal, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def check(self, scope: Scope, settings: Settings) -> TooManyRequests | None:
        """The 429 to answer, or None when every limit still has room."""
        window_ms = max(1, int(settings.rate_limit_window_s * 1000))
        limits: list[tuple[str, int, str]] = []  # (counter key, limit, what it counts)
        token = _header(scope, API_KEY_HEADER)
        if settings.rate_limit_per_key and token:
            # The key's hash names the counter: Redis never holds a key in clear.
            digest = hashlib.sha256(token).hexdigest()[:32]
            limits.append((f"{KEY_PREFIX}rate:key:{digest}", settings.rate_limit_per_key, "this API key"))
        client = scope.get("client")
        if settings.rate_limit_per_ip and client:
            limits.append((f"{KEY_PREFIX}rate:ip:{client[0]}", settings.rate_limit_per_ip, "this address"))
        if not limits:
            return None
        try:
            counts: list[Any] = await self._redis(settings.redis_url).eval(
                _COUNT, len(limits), *[key for key, _, _ in limits], window_ms)
        except (RedisError, OSError) as exc:
            now = time.monotonic()
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning("rate limits not enforced: Redis unavailable (%s)", exc)
            return None
        for index, (_, limit, who) in enumerate(limits):
            count, left_ms = int(counts[2 * index]), int(counts[2 * index + 1])
            if count > limit:
                window = f"{settings.rate_limit_window_s:g}"
                return TooManyRequests(
                    f"too many writes from {who}: at most {limit} per {window} s; try again in "
                    f"{math.ceil(left_ms / 1000)} s", retry_after_s=math.ceil(left_ms / 1000))
        return None
