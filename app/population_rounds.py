"""A stored population's FL rounds: the round model (understudy/rounds.py) over its finished predictions, and the
answers of GET /v1/populations/{id}/rounds and /trace. Computed on every request from the stored rows and the
request's parameters: nothing about rounds is stored."""

from __future__ import annotations

import math

import numpy as np

from app.errors import Conflict, FieldError
from app.schemas import (ClientKindPublic, DeadlineCurvePublic, PopulationRoundsPublic, RoundOutcomePublic,
                         RoundsQuery)
from understudy.param_counts import param_count
from understudy.results import Status
from understudy.rounds import DeviceStep, RoundConfig, RoundError, RoundModel
from ledger.models import Population, Prediction
from understudy.workload import Workload

# The deadline curves: this many deadlines from the fastest to the slowest plausible client (3 sigma either side).
_CURVE_POINTS = 60


def round_model(population: Population, rows: dict[str, Prediction], config: RoundConfig) -> RoundModel:
    """The round model over the population's device kinds whose prediction is done."""
    if population.status != "done":
        raise Conflict(f"population {population.id} is {population.status}: its rounds need every prediction final "
                       f"and at least one device that runs the workload (GET /v1/populations/{population.id})")
    devices = []
    for member in population.members:
        row = rows.get(member["prediction_id"])
        if row is not None and row.status == Status.done.value and row.latency_ms is not None:
            devices.append(DeviceStep(target_id=member["target_id"], step_ms=row.latency_ms,
                                      weight=float(member["weight"]), spread_ms=row.spread_ms,
                                      target_name=member.get("target_name")))
    workload = Workload.model_validate(population.workload)
    try:
        return RoundModel(devices, batch_size=workload.batch_size, config=config,
                          param_count=param_count(workload.model, workload.num_classes, workload.in_chans))
    except RoundError as exc:
        raise FieldError("update_mb", str(exc)) from None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def rounds_public(population_id: str, model: RoundModel, query: RoundsQuery) -> PopulationRoundsPublic:
    low = min(kind.nominal_s * math.exp(-3 * kind.sigma) for kind in model.kinds) * 0.95
    high = max(kind.nominal_s * math.exp(3 * kind.sigma) for kind in model.kinds) * 1.05
    deadlines = np.geomspace(low, high, _CURVE_POINTS)
    outcomes = []
    for k in query.k:
        outcome = model.deadline(k, query.deadline_s) if query.deadline_s is not None else None
        outcomes.append(RoundOutcomePublic(
            k=k, sampled=model.config.sampled(k), p_complete=model.p_complete(k),
            expected_round_s=_finite(model.expected_round_s(k)),
            p_deadline=outcome.p_complete if outcome else None,
            expected_finishers=outcome.expected_finishers if outcome else None))
    return PopulationRoundsPublic(
        population_id=population_id, local_steps=model.steps, batch_size=model.batch_size,
        update_bytes=model.update_bytes, config=model.config, deadline_s=query.deadline_s,
        kinds=[ClientKindPublic(target_id=k.target_id, target_name=k.target_name, share=k.share, step_ms=k.step_ms,
                                down_mbps=k.link.down_mbps, up_mbps=k.link.up_mbps, download_s=k.download_s,
                                compute_s=k.compute_s, upload_s=k.upload_s, nominal_s=k.nominal_s, sigma=k.sigma)
               for k in model.kinds],
        rounds=outcomes,
        deadline_curves=[DeadlineCurvePublic(k=k, deadline_s=deadlines.tolist(),
                                             p_complete=model.closed_by(k, deadlines).tolist()) for k in query.k],
    )
