"""POST a workload and its targets; poll one prediction; read the history."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status
from redis import Redis
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app import crud
from app.api.deps import ReadKeyDep, RedisDep, SessionDep, SettingsDep, WriteKeyDep
from app.errors import NotFound
from app.finished import finished
from app.schemas import (COMMON_ERRORS, ErrorPublic, PredictionCreate, PredictionPublic, PredictionRequestPublic,
                         PredictionsPublic, prediction_public)
from app.security import Caller
from understudy.bands import DEFAULT_COVERAGE, MAX_COVERAGE, MIN_COVERAGE
from understudy.results import Status
from understudy.settings import Settings

router = APIRouter(prefix="/v1/predictions", tags=["predictions"])

CoverageQuery = Annotated[float, Query(ge=MIN_COVERAGE, le=MAX_COVERAGE, allow_inf_nan=False,
                                       description=f"the share of measured step times each answer's interval_ms is "
                                                   f"meant to hold, {MIN_COVERAGE} to {MAX_COVERAGE}")]


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=PredictionRequestPublic,
    responses={
        200: {"model": PredictionRequestPublic, "description": "every result was cached: here they are"},
        202: {"description": "queued (or estimated without a GPU, while the GPU measurement is awaited): poll "
                             "GET /v1/predictions/{id} for each id"},
        409: {"model": ErrorPublic, "description": "a GPU estimator and no GPU worker (or the named host) registered; "
                                                   "or estimator calibrated and a target without a calibration"},
        **COMMON_ERRORS,
    },
)
async def create_predictions(body: PredictionCreate, response: Response, session: SessionDep, redis: RedisDep,
                             settings: SettingsDep, caller: WriteKeyDep) -> PredictionRequestPublic:
    """Predict a workload's step time on each target: 202 with one prediction per target to poll, or 200 at once
    when every result is in the cache. The same request twice (or at the same moment) runs once. A prediction that
    waits for a GPU measurement is estimated without a GPU first: from the cache at once (status estimated in this
    answer), else within seconds."""
    # A repeated request whose results this process has served the caller before: from memory, on the event loop.
    keys = crud.cache_keys_at_once(settings=settings, request=body)
    hits = (finished.by_keys(keys, caller.key_id if caller is not None else None, settings.remember_finished_s)
            if keys is not None else None)
    if hits is not None:
        response.status_code = status.HTTP_200_OK
        data = [public.at_coverage(body.coverage).model_copy(update={"cached": True}) for public in hits]
        return PredictionRequestPublic(request_id=uuid.uuid4().hex, cached=True, data=data, count=len(data))
    return await run_in_threadpool(_create_predictions, body, response, session, redis, settings, caller)


def _create_predictions(body: PredictionCreate, response: Response, session: Session, redis: Redis,
                        settings: Settings, caller: Caller | None) -> PredictionRequestPublic:
    with session:  # returns the connection here, in the handler's thread (app/api/deps.py)
        created = crud.create_predictions(session=session, redis=redis, settings=settings, request=body,
                                          caller=caller)
    if created.all_final:
        response.status_code = status.HTTP_200_OK
    data = []
    for row, cached in zip(created.rows, created.cached, strict=True):
        public = prediction_public(row, coverage=body.coverage)
        # Every row is in the caller's history now (crud.record_owner).
        finished.remember(public, row.cache_key, caller.key_id if caller is not None else None)
        data.append(public.model_copy(update={"cached": True}) if cached else public)
    return PredictionRequestPublic(request_id=created.request_id, cached=created.all_cached, data=data,
                                   count=len(data))


@router.get("/{prediction_id}", response_model=PredictionPublic,
            responses={404: {"model": ErrorPublic, "description": "no prediction has this id"}, **COMMON_ERRORS})
async def read_prediction(prediction_id: str, session: SessionDep, settings: SettingsDep, caller: ReadKeyDep,
                          coverage: CoverageQuery = DEFAULT_COVERAGE) -> PredictionPublic:
    """One prediction: its status and, once done, its latency with the interval it should fall in, whether it fits
    the target's memory, the host setting it was measured under, and how. While a GPU measurement is awaited it may
    show status estimated: the GPU-free estimate's numbers, marked answer=estimate, until the final answer replaces
    them (the estimate stays in `estimate`). A key sees the predictions it asked for (an admin key every one)."""
    owner = crud.visible_owner(caller)
    # A finished row this process has shown this owner before: from memory, on the event loop.
    public = finished.get(prediction_id, owner, settings.remember_finished_s)
    if public is None:
        public = await run_in_threadpool(_read_prediction, prediction_id, session, owner)
    return public.at_coverage(coverage)


def _read_prediction(prediction_id: str, session: Session, owner: str | None) -> PredictionPublic:
    with session:  # returns the connection here, in the handler's thread (app/api/deps.py)
        row = crud.get_prediction(session=session, prediction_id=prediction_id, owner=owner)
    if row is None:
        raise NotFound(f"no prediction with id {prediction_id!r}")
    public = prediction_public(row)
    finished.remember(public, row.cache_key, owner)
    return public


@router.get("", response_model=PredictionsPublic, responses=COMMON_ERRORS)
def read_predictions(
    session: SessionDep,
    caller: ReadKeyDep,
    model: Annotated[str | None, Query(max_length=200, description="a timm model name")] = None,
    target: Annotated[str | None, Query(max_length=120, description="a target id")] = None,
    host: Annotated[str | None, Query(max_length=200, description="host class, fingerprint, GPU name or worker "
                                                                  "slot")] = None,
    estimator: Annotated[str | None, Query(max_length=40)] = None,
    status_: Annotated[Status | None, Query(alias="status", description="as each prediction's status shows it: "
                                            "estimated is a prediction waiting for its GPU measurement with an "
                                            "estimate in hand, so queued and running are those without one")] = None,
    since: Annotated[datetime | None, Query(description="created at or after (ISO 8601)")] = None,
    until: Annotated[datetime | None, Query(description="created before (ISO 8601)")] = None,
    workload: Annotated[str | None, Query(max_length=64, description="a workload digest (workload_digest): "
                                                                     "every prediction of one workload")] = None,
    request_id: Annotated[str | None, Query(max_length=32, description="the predictions of one POST")] = None,
    q: Annotated[str | None, Query(max_length=200, description="search: a substring of the model, target, "
                                                               "estimator, host, status, id or error")] = None,
    sort: Annotated[Literal["created_at", "model", "target", "estimator", "status", "host", "latency",
                            "samples_per_s"], Query(description="the column to sort by")] = "created_at",
    order: Annotated[Literal["asc", "desc"], Query()] = "desc",
    skip: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    coverage: CoverageQuery = DEFAULT_COVERAGE,
) -> PredictionsPublic:
    """The caller's history (an admin key's: everyone's), newest first unless sorted otherwise, filtered, searched
    and paged (count is the total over all pages)."""
    filters = crud.PredictionFilters(model=model, target=target, host=host, estimator=estimator, status=status_,
                                     since=since, until=until, workload_digest=workload, request_id=request_id, q=q,
                                     owner=crud.visible_owner(caller))
    rows, count = crud.list_predictions(session=session, filters=filters, skip=skip, limit=limit, sort=sort,
                                        descending=order == "desc")
    return PredictionsPublic(data=[prediction_public(row, coverage=coverage) for row in rows], count=count)
