"""A stored population's FL rounds: the round model (understudy/rounds.py) over its finished predictions, and the
answers of GET /v1/populations/{id}/rounds and /trace. Computed on every request from the stored rows and the
request's parameters: nothing about rounds is stored."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.errors import Conflict, FieldError
from app.schemas import (ClientKindPublic, DeadlineCurvePublic, PopulationRoundsPublic, RoundOutcomePublic,
                         RoundsQuery)
from understudy.catalog import TargetSpec
from understudy.links import device_kind
from understudy.param_counts import param_count
from understudy.results import Status, split_details
from understudy.rounds import ClientKind, DeviceStep, RoundConfig, RoundError, RoundModel
from understudy.traces import BAND_COVERAGE
from ledger.models import Population, Prediction
from understudy.workload import Workload

# The deadline curves: this many deadlines from the fastest to the slowest plausible client (every spread 3 sigma out).
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
            devices.append(device_step(member, row))
    workload = Workload.model_validate(population.workload)
    try:
        return RoundModel(devices, batch_size=workload.batch_size, config=config,
                          param_count=param_count(workload.model, workload.num_classes, workload.in_chans))
    except RoundError as exc:
        raise FieldError("update_mb", str(exc)) from None


def device_step(member: dict[str, Any], row: Prediction) -> DeviceStep:
    """A done prediction as the round model takes it: its GPU step, the kernels it launches (details["kernels"],
    from the engine's count), its error band and its device's kind (from the stored target)."""
    assert row.latency_ms is not None
    details, band, _ = split_details(row.details)
    kernels = details.get("kernels")
    return DeviceStep(target_id=member["target_id"], step_ms=row.latency_ms, weight=float(member["weight"]),
                      kind=device_kind(TargetSpec.model_validate(row.target)), spread_ms=row.spread_ms,
                      target_name=member.get("target_name"), kernels=int(kernels) if kernels is not None else None,
                      band=band)


def kind_public(kind: ClientKind) -> ClientKindPublic:
    interval = kind.step_interval_ms(BAND_COVERAGE)
    return ClientKindPublic(
        target_id=kind.target_id, target_name=kind.target_name, device_kind=kind.kind, share=kind.share,
        step_ms=kind.step_ms, gpu_ms=kind.gpu_ms, launch_ms=kind.launch_ms,
        step_low_ms=interval[0] if interval else None, step_high_ms=interval[1] if interval else None,
        down_mbps=kind.link.down_mbps, up_mbps=kind.link.up_mbps, download_s=kind.download_s,
        compute_s=kind.compute_s, upload_s=kind.upload_s, nominal_s=kind.nominal_s, sigma=kind.sigma,
        compute_sigma=kind.compute_sigma, link_sigma=kind.link_sigma)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def rounds_public(population_id: str, model: RoundModel, query: RoundsQuery) -> PopulationRoundsPublic:
    low, high = model.span_s(3.0)
    deadlines = np.geomspace(low * 0.95, high * 1.05, _CURVE_POINTS)
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
        kinds=[kind_public(kind) for kind in model.kinds],
        rounds=outcomes,
        deadline_curves=[DeadlineCurvePublic(k=k, deadline_s=deadlines.tolist(),
                                             p_complete=model.closed_by(k, deadlines).tolist()) for k in query.k],
    )
