"""POST a workload and a weighted device population; poll it until its predictions are done and summarised."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app import crud
from app.api.deps import ReadKeyDep, RedisDep, SessionDep, SettingsDep, WriteKeyDep
from app.errors import NotFound
from app.schemas import (COMMON_ERRORS, ErrorPublic, PopulationCreate, PopulationPublic, PopulationsPublic,
                         population_public)

router = APIRouter(prefix="/v1/populations", tags=["populations"])


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=PopulationPublic,
    responses={
        200: {"model": PopulationPublic, "description": "every prediction was cached: the summary is here"},
        202: {"description": "queued: poll GET /v1/populations/{id} until status is done"},
        409: {"model": ErrorPublic, "description": "a GPU estimator and no GPU worker (or the named host) registered"},
        **COMMON_ERRORS,
    },
)
def create_population(body: PopulationCreate, response: Response, session: SessionDep, redis: RedisDep,
                      settings: SettingsDep, caller: WriteKeyDep) -> PopulationPublic:
    """Predict the workload on every device kind of the population (one prediction per distinct target, cached
    like any other), then answer the per-device latencies, weighted p50/p90/p99, the slowest devices and the
    expected round time when K clients are sampled at random (the expected maximum of K latencies)."""
    population, rows = crud.create_population(session=session, redis=redis, settings=settings, request=body,
                                                caller=caller)
    if population.status in ("done", "failed"):
        response.status_code = status.HTTP_200_OK
    return population_public(population, rows)


@router.get("/{population_id}", response_model=PopulationPublic,
            responses={404: {"model": ErrorPublic, "description": "no population has this id"}, **COMMON_ERRORS})
def read_population(population_id: str, session: SessionDep, caller: ReadKeyDep) -> PopulationPublic:
    """One population: its devices' predictions and, once all are final, the summary (a key sees its own)."""
    population = crud.get_population(session=session, population_id=population_id,
                                     owner=crud.visible_owner(caller))
    if population is None:
        raise NotFound(f"no population with id {population_id!r}")
    rows = crud.refresh_population(session=session, population=population)
    return population_public(population, rows)


@router.get("", response_model=PopulationsPublic, responses=COMMON_ERRORS)
def read_populations(session: SessionDep, caller: ReadKeyDep, skip: Annotated[int, Query(ge=0)] = 0,
                     limit: Annotated[int, Query(ge=1, le=100)] = 20) -> PopulationsPublic:
    """The caller's populations, newest first, paged (count is the total), as last summarised: a list only reads
    (GET /v1/populations/{id} brings one up to date)."""
    populations, count = crud.list_populations(session=session, skip=skip, limit=limit,
                                               owner=crud.visible_owner(caller))
    data = [population_public(p, crud.population_rows(session=session, population=p)) for p in populations]
    return PopulationsPublic(data=data, count=count)
