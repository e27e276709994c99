"""Limits on what one client can send: a body size cap (413) and rate limits on writes and on reads, per API key
and per client address (429 with Retry-After). Both are plain ASGI middlewares, so a refused request costs no
database round trip and never reaches a route, let alone the queue.

The rate limits are fixed windows counted in Redis, so every API process shares them. A process takes a limit's
requests from its Redis counter in batches (one INCRBY per limit, in one script call) and spends them by itself until
the batch or its window runs out: one Redis round trip serves up to BATCH_SHARE of the limit (at most MAX_BATCH
requests) instead of one each, which was a tenth of a cache hit's CPU (benchmarks/load/REPORT.md). A window never
admits more than its limit, whichever processes serve it, since every request admitted was counted first; a batch
taken and not spent (its process got fewer requests) only makes the others refuse earlier, by less than one batch
per process. Should Redis not answer, requests are let through: the limits protect the service, and a write that
needs the queue gets its own 503 anyway.
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

from app.errors import ApiError, BadRequest, PayloadTooLarge, TooManyRequests, api_error_response
from ledger.queues import KEY_PREFIX
from understudy.settings import Settings, get_settings

log = logging.getLogger("understudy.api")

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
API_KEY_HEADER = b"x-api-key"

BATCH_SHARE = 0.01
MAX_BATCH = 50
HELD_ENTRIES = 10_000

# INCRBY each window counter by its batch (ARGV[1 + i]), starting its window on the first take; answer [count,
# ms left] per key.
_TAKE = """
local out = {}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCRBY', key, ARGV[1 + i])
  if n == tonumber(ARGV[1 + i]) then redis.call('PEXPIRE', key, ARGV[1]) end
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


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value
    return None


async def answer(exc: ApiError, scope: Scope, receive: Receive, send: Send) -> None:
    await api_error_response(exc)(scope, receive, send)


class BodySizeLimit:
    """Refuse request bodies over UNDERSTUDY_MAX_BODY_BYTES with 413, counting the bytes that actually arrive.

    A declared Content-Length over the limit is refused before anything is read. Every body is then read here, in
    full and counted, before the app sees it: a Content-Length that understates a chunked body, or a server that
    reads past the declared length, cannot get more than the limit into the app. A request that declares both
    Content-Length and Transfer-Encoding is refused (400): the two can disagree about where the body ends, which is
    how requests are smuggled past a proxy.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings_of(scope).max_body_bytes
        too_large = PayloadTooLarge(f"the body is larger than {limit} bytes (UNDERSTUDY_MAX_BODY_BYTES)")
        length = header(scope, b"content-length")
        chunked = header(scope, b"transfer-encoding") is not None
        if length is not None and chunked:
            await answer(BadRequest("a request may not declare both Content-Length and Transfer-Encoding"), scope,
                         receive, send)
            return
        if length is not None and (not length.isdigit() or int(length) > limit):
            await answer(too_large, scope, receive, send)
            return
        if length is None and not chunked:
            await self.app(scope, receive, send)  # no body at all
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left; the app will see the disconnect
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await answer(too_large, scope, receive, send)
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


def batch_of(limit: int) -> int:
    """How many requests of a limit a process takes from Redis at a time."""
    return max(1, min(MAX_BATCH, int(limit * BATCH_SHARE)))


class RateLimit:
    """Count requests per API key and per client address in fixed windows; past a limit, 429 with Retry-After.

    Writes and reads of the API's resources (/v1/...) have limits of their own: a read costs a database query, and
    an unlimited reader can hold every connection of the pool."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # One asyncio client per event loop (a test's TestClient runs each app start in a loop of its own).
        self._clients: weakref.WeakKeyDictionary[AbstractEventLoop, dict[str, AsyncRedis]] = (
            weakref.WeakKeyDictionary())
        # What this process holds of each window: (Redis URL, counter, limit, window ms) -> [requests left, when the
        # window ends (time.monotonic())]. Other limits or another Redis are other windows.
        self._held: dict[tuple[str, str, int, int], list[float]] = {}
        self._warned_at = 0.0

    def _redis(self, url: str) -> AsyncRedis:
        clients = self._clients.setdefault(get_running_loop(), {})
        if url not in clients:
            # Short timeouts and no retries: a slow Redis must not hold up every request.
            clients[url] = AsyncRedis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5, retry=None)
        return clients[url]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        write = scope["method"] in WRITE_METHODS
        if not write and not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)  # health checks, the dashboard's files, the docs
            return
        settings = settings_of(scope)
        refusal = await self.check(scope, settings, write=write)
        if refusal is not None:
            await answer(refusal, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def check(self, scope: Scope, settings: Settings, *, write: bool = True) -> TooManyRequests | None:
        """The 429 to answer, or None when every limit still has room."""
        window_ms = max(1, int(settings.rate_limit_window_s * 1000))
        kind, per_key, per_ip = (("writes", settings.rate_limit_per_key, settings.rate_limit_per_ip) if write else
                                 ("reads", settings.read_limit_per_key, settings.read_limit_per_ip))
        limits: list[tuple[str, int, str]] = []  # (counter key, limit, what it counts)
        token = header(scope, API_KEY_HEADER)
        if per_key and token:
            # The key's hash names the counter: Redis never holds a key in clear.
            digest = hashlib.sha256(token).hexdigest()[:32]
            limits.append((f"{KEY_PREFIX}rate:{kind}:key:{digest}", per_key, "this API key"))
        client = scope.get("client")
        if per_ip and client:
            limits.append((f"{KEY_PREFIX}rate:{kind}:ip:{client[0]}", per_ip, "this address"))
        now = time.monotonic()
        to_take: list[tuple[str, int, str]] = []
        for counter, limit, who in limits:
            held = self._held.get((settings.redis_url, counter, limit, window_ms))
            if held is not None and held[0] >= 1 and held[1] > now:
                held[0] -= 1  # spent here, counted in Redis when the batch was taken
            else:
                to_take.append((counter, limit, who))
        if not to_take:
            return None
        batches = [batch_of(limit) for _, limit, _ in to_take]
        try:
            counts: list[Any] = await self._redis(settings.redis_url).eval(
                _TAKE, len(to_take), *[key for key, _, _ in to_take], window_ms, *batches)
        except (RedisError, OSError) as exc:
            now = time.monotonic()
            if now - self._warned_at > 60:
                self._warned_at = now
                log.warning("rate limits not enforced: Redis unavailable (%s)", exc)
            return None
        if len(self._held) >= HELD_ENTRIES:
            self._held.clear()  # many addresses or keys must not grow the process without bound
        refusal = None
        for index, ((counter, limit, who), batch) in enumerate(zip(to_take, batches, strict=True)):
            count, left_ms = int(counts[2 * index]), int(counts[2 * index + 1])
            # The part of the batch within the limit; the rest was counted and is never admitted.
            granted = min(batch, limit - (count - batch))
            # This request takes one; the window ends no later than Redis's (its clock started after `now`).
            self._held[(settings.redis_url, counter, limit, window_ms)] = [granted - 1, now + left_ms / 1000]
            if granted < 1 and refusal is None:
                window = f"{settings.rate_limit_window_s:g}"
                refusal = TooManyRequests(
                    f"too many {kind} from {who}: at most {limit} per {window} s; try again in "
                    f"{math.ceil(left_ms / 1000)} s", retry_after_s=math.ceil(left_ms / 1000))
        return refusal
