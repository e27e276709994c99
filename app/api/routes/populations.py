"""POST a workload and a weighted device population; poll it until its predictions are done and summarised."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app import crud
from app.api.deps import ReadKeyDep, RedisDep, SessionDep, SettingsDep, WriteKeyDep
from app.errors import NotFound
from app.population_rounds import round_model, rounds_public
from app.schemas import (COMMON_ERRORS, ErrorPublic, PopulationCreate, PopulationPublic, PopulationRoundsPublic,
                         PopulationsPublic, RoundsQuery, TraceQuery, population_public)
from understudy.traces import render, sample_trace

router = APIRouter(prefix="/v1/populations", tags=["populations"])


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=PopulationPublic,
    responses={
        200: {"model": PopulationPublic, "description": "every prediction was cached: the summary is here"},
        202: {"description": "queued (or estimated, with a provisional summary): poll GET /v1/populations/{id} "
                             "until status is done"},
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
    """One population: its devices' predictions and, once all are final, the summary; while the devices not final
    yet all carry a GPU-free estimate, status estimated and a provisional summary from those (a key sees its own)."""
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


_ROUND_ERRORS = {404: {"model": ErrorPublic, "description": "no population has this id"},
                 409: {"model": ErrorPublic, "description": "the population is not done (or no device ran)"},
                 **COMMON_ERRORS}


@router.get("/{population_id}/rounds", response_model=PopulationRoundsPublic, responses=_ROUND_ERRORS)
def read_population_rounds(population_id: str, session: SessionDep, caller: ReadKeyDep,
                           query: Annotated[RoundsQuery, Query()]) -> PopulationRoundsPublic:
    """The population's FL rounds: each device kind's download, local compute and upload, and for each K the
    chance that K of the sampled clients finish, the expected round time and, with deadline_s, the chance that K
    finish by it; deadline curves for the dashboard (understudy/rounds.py has the formulas)."""
    population = crud.get_population(session=session, population_id=population_id,
                                     owner=crud.visible_owner(caller))
    if population is None:
        raise NotFound(f"no population with id {population_id!r}")
    rows = crud.refresh_population(session=session, population=population)
    return rounds_public(population.id, round_model(population, rows, query.round_config()), query)


@router.get("/{population_id}/trace", response_class=Response,
            responses={200: {"description": "the trace file (a pickle for fedscale and fedscale_avail, CSV for csv, "
                                            "else JSON)",
                             "content": {"application/json": {}, "text/csv": {}, "application/octet-stream": {}}},
                       **_ROUND_ERRORS})
def read_population_trace(population_id: str, session: SessionDep, caller: ReadKeyDep,
                          query: Annotated[TraceQuery, Query()]) -> Response:
    """A per-client trace of the population for an FL simulator: `clients` clients drawn from the fleet's weights,
    each a device of its own (its compute and link drawn around its kind's), with its step's error band; in each of
    `rounds` rounds, who takes part, availability, dropout, each one's download, compute and upload time and when
    the round closes; seeded. Formats: fedscale (FedScale's device-capacity pickle), fedscale_avail (its
    availability pickle), oort, flgo, appfl, csv, json (understudy/traces.py)."""
    population = crud.get_population(session=session, population_id=population_id,
                                     owner=crud.visible_owner(caller))
    if population is None:
        raise NotFound(f"no population with id {population_id!r}")
    rows = crud.refresh_population(session=session, population=population)
    model = round_model(population, rows, query.round_config())
    trace = sample_trace(model, clients=query.clients, rounds=query.rounds, seed=query.seed, k=query.k)
    rendered = render(trace, query.format, name=f"population-{population.id}", oort_threshold=query.oort_threshold,
                      num_classes=int(population.workload.get("num_classes", 1000)))
    return Response(rendered.body, media_type=rendered.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{rendered.filename}"'})
