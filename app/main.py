"""The Understudy API: builds the FastAPI app. Never imports torch or any GPU code (tests/service checks)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from app import errors
from app.api.main import api_router
from app.core.config import get_settings
from app.core.db import db_engine, redis_for
from app.auth import ApiKeyGate
from app.finished import finished
from app.limits import BodySizeLimit, RateLimit
from ledger.dispatch import reconcile

log = logging.getLogger("understudy.api")

DESCRIPTION = """Predict a deep-learning workload's step time on GPUs you don't have.

POST a workload and targets to `/v1/predictions`; poll each prediction by id. Results are cached by workload,
target, estimator and host: the same request again is answered at once. Reads and writes need an API key
(`X-API-Key`); a key sees what it asked for, an admin key everything.
"""


async def reconcile_forever(interval_s: float) -> None:
    """Re-queue ledger rows that Redis lost, now and every interval (in a thread: the store calls block)."""
    while True:
        settings = get_settings()
        try:
            await asyncio.to_thread(reconcile, db_engine(settings), redis_for(settings.redis_url), settings)
        except (RedisError, SQLAlchemyError) as exc:
            log.warning("reconciler: %s", exc)
        await asyncio.sleep(interval_s)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # What start-up made (modules, the app, its schema: ~100k objects) lives as long as the process. Frozen, it is left
    # out of the collector's full passes, which otherwise stall every request in flight for ~60 ms now and then
    # (benchmarks/load/REPORT.md). Once per process: a later start (a test's) must not freeze its garbage too.
    if gc.get_freeze_count() == 0:
        gc.freeze()
    # What a previous start remembered may name rows that are gone (a test's truncated tables).
    finished.clear()
    interval = get_settings().reconcile_interval_s
    task = asyncio.create_task(reconcile_forever(interval)) if interval > 0 else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


def create_app() -> FastAPI:
    # The documentation pages are app/api/routes/docs.py's, with their assets served from here (no CDN).
    app = FastAPI(title="Understudy", version="0.1.0", description=DESCRIPTION, lifespan=lifespan, docs_url=None,
                  redoc_url=None)
    errors.install(app)
    # The last added runs first: rate limits, then the API key (before any body is read), then the body size cap,
    # then the routes.
    app.add_middleware(BodySizeLimit)
    app.add_middleware(ApiKeyGate)
    app.add_middleware(RateLimit)

    app.include_router(api_router)
    return app


app = create_app()
