"""Every exception the API can meet, mapped to a JSON answer in one place. No answer carries a traceback.

Body: {"detail": "<readable>", "errors": [{"field": "...", "reason": "..."}]} (errors only for 422).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import (DataError, DBAPIError, DisconnectionError, InterfaceError, OperationalError,
                            ProgrammingError)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.schemas import TARGET_TAGS
from understudy.errors import InvalidWorkload, UnknownEstimator, UnknownTarget

log = logging.getLogger("understudy.api")


# --- the API's own exceptions (small and flat) ------------------------------------------------------------------


class ApiError(Exception):
    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(ApiError):
    status_code = 400


class NotFound(ApiError):
    status_code = 404


class Conflict(ApiError):
    status_code = 409


class Unauthorized(ApiError):
    status_code = 401


class Forbidden(ApiError):
    status_code = 403


class ServiceUnavailable(ApiError):
    status_code = 503

    def __init__(self, detail: str, retry_after_s: int = 5) -> None:
        super().__init__(detail)
        self.retry_after_s = max(1, retry_after_s)


class PayloadTooLarge(ApiError):
    status_code = 413


class TooManyRequests(ApiError):
    status_code = 429

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = max(1, retry_after_s)


class FieldError(ApiError):
    """A request field that is well-formed but unusable (422), outside what pydantic checks."""

    status_code = 422

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


# --- formatting -------------------------------------------------------------------------------------------------


def field_name(loc: Sequence[Any]) -> str:
    """('body', 'targets', 1, 'inline', 'sm_count') -> 'targets[1].sm_count'."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    previous: Any = None
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        elif part in TARGET_TAGS and (isinstance(previous, int) or previous == "target"):
            pass  # the discriminated union's branch (targets[i] or a population's devices[i].target), not a field
        else:
            name += ("." if name else "") + str(part)
        previous = part
    return name or "body"


def _reason(message: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def _error(status: int, detail: str, errors: list[dict[str, str]] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail}
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(status_code=status, content=body, headers=headers)


def _unprocessable(errors: list[dict[str, str]]) -> JSONResponse:
    detail = "; ".join(f"{e['field']}: {e['reason']}" for e in errors)
    return _error(422, detail, errors)


# --- handlers ---------------------------------------------------------------------------------------------------


# A 422 names at most this many fields, each reason at most this long: a small body must not buy a large answer.
MAX_ERRORS = 20
MAX_REASON_CHARS = 500


async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors: list[dict[str, str]] = []
    seen = set()
    all_errors = exc.errors()
    for error in all_errors:
        if len(errors) >= MAX_ERRORS:
            errors.append({"field": "body", "reason": "further errors not shown"})
            break
        if error.get("type") == "json_invalid":
            item = {"field": "body", "reason": f"invalid JSON: {error.get('ctx', {}).get('error', error['msg'])}"}
        elif error.get("type") == "missing" and tuple(error.get("loc", ())) == ("body",):
            item = {"field": "body", "reason": "a JSON body is required"}
        else:
            item = {"field": field_name(error.get("loc", ())),
                    "reason": _reason(str(error.get("msg", "invalid")))[:MAX_REASON_CHARS]}
        if (item["field"], item["reason"]) not in seen:
            seen.add((item["field"], item["reason"]))
            errors.append(item)
    return _unprocessable(errors)


def api_error_response(exc: ApiError) -> JSONResponse:
    """The answer to one of the API's own exceptions; also used by the middlewares in app/limits.py, which answer
    before any exception handler runs."""
    if isinstance(exc, FieldError):
        return _unprocessable([{"field": exc.field, "reason": exc.reason}])
    headers = {"WWW-Authenticate": "ApiKey"} if isinstance(exc, Unauthorized) else None
    if isinstance(exc, ServiceUnavailable):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, TooManyRequests):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return _error(exc.status_code, exc.detail, headers=headers)


async def on_api_error(request: Request, exc: ApiError) -> JSONResponse:
    return api_error_response(exc)


async def on_domain_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, InvalidWorkload):
        field = f"workload.{exc.field}" if exc.field else "workload"
    elif isinstance(exc, UnknownTarget):
        field = "targets"
    else:
        field = "estimator"
    return _unprocessable([{"field": field, "reason": str(exc)}])


async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such path: {request.url.path}"
    return _error(exc.status_code, detail, headers=getattr(exc, "headers", None))


async def on_database_error(request: Request, exc: DBAPIError | DisconnectionError | PoolTimeout) -> JSONResponse:
    orig = getattr(exc, "orig", None)
    if isinstance(exc, ProgrammingError) and type(orig).__name__ == "UndefinedTable":
        log.error("database schema missing: %s", orig)
        return _error(503, "the database has no Understudy tables yet: run `alembic upgrade head`",
                      headers={"Retry-After": "30"})
    if isinstance(exc, (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        log.warning("database unavailable: %s", orig or exc)
        return _error(503, "the database is unavailable; try again shortly", headers={"Retry-After": "5"})
    if isinstance(exc, DataError):
        # A value that passed validation but that the database cannot hold or compare (an offset past bigint...).
        first_line = str(orig or exc).strip().splitlines()[0]
        log.warning("database refused a request value: %s", first_line)
        return _unprocessable([{"field": "request", "reason": f"a value is out of the range the database accepts "
                                                              f"({first_line})"}])
    return await on_unexpected(request, exc)


async def on_redis_error(request: Request, exc: Exception) -> JSONResponse:
    log.warning("Redis unavailable: %s", exc)
    return _error(503, "the job queue (Redis) is unavailable; try again shortly", headers={"Retry-After": "5"})


async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    reference = uuid.uuid4().hex[:12]
    log.error("unexpected error (reference %s) on %s %s", reference, request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal error (reference {reference}); the server log has the details")


def install(app: FastAPI) -> None:
    """Register every handler on the app. Starlette types a handler as taking any Exception, so the handlers that
    take the one class they are registered for need the arg-type ignores below."""
    app.add_exception_handler(RequestValidationError, on_validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(ApiError, on_api_error)  # type: ignore[arg-type]
    for domain in (InvalidWorkload, UnknownTarget, UnknownEstimator):
        app.add_exception_handler(domain, on_domain_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)  # type: ignore[arg-type]
    for database in (DBAPIError, DisconnectionError, PoolTimeout):
        app.add_exception_handler(database, on_database_error)  # type: ignore[arg-type]
    for redis_error in (RedisConnectionError, RedisTimeoutError):
        app.add_exception_handler(redis_error, on_redis_error)
    app.add_exception_handler(Exception, on_unexpected)
