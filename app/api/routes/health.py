"""Liveness (the process answers) and readiness (the database and Redis answer)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.api.deps import RedisDep, SessionDep
from app.schemas import HealthPublic

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic)
def healthz() -> HealthPublic:
    """The process is up."""
    return HealthPublic(status="ok")


@router.get("/readyz", response_model=HealthPublic, responses={503: {"model": HealthPublic}})
def readyz(session: SessionDep, redis: RedisDep) -> JSONResponse:
    """The database and Redis both answer (503 naming the one that does not)."""
    checks = {}
    try:
        session.execute(text("SELECT 1 FROM predictions LIMIT 1"))
        checks["database"] = "ok"
    except SQLAlchemyError as exc:
        checks["database"] = f"unavailable: {type(exc).__name__}"
    try:
        redis.ping()
        checks["redis"] = "ok"
    except RedisError as exc:
        checks["redis"] = f"unavailable: {type(exc).__name__}"
    ok = all(value == "ok" for value in checks.values())
    body = HealthPublic(status="ok" if ok else "unavailable", checks=checks)
    return JSONResponse(status_code=200 if ok else 503, content=body.model_dump())
