"""SQLAlchemy 2 models. The predictions table is the ledger: a row exists before anything is queued."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, String, Text, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


class Prediction(Base):
    __tablename__ = "predictions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    cache_key: Mapped[str] = mapped_column(String(64), unique=True)
    request_id: Mapped[str | None] = mapped_column(String(32), index=True)
    workload_digest: Mapped[str] = mapped_column(String(64), index=True)
    workload: Mapped[dict[str, Any]]
    model: Mapped[str] = mapped_column(String(200), index=True)
    target_id: Mapped[str] = mapped_column(String(80), index=True)
    target: Mapped[dict[str, Any]]
    estimator: Mapped[str] = mapped_column(String(40), index=True)
    estimator_version: Mapped[str] = mapped_column(String(20))
    host_class: Mapped[str] = mapped_column(String(80), index=True)
    host_fingerprint: Mapped[str | None] = mapped_column(String(80))
    host_name: Mapped[str | None] = mapped_column(String(120))
    status: Mapped[str] = mapped_column(String(16), index=True)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    median_ms: Mapped[float | None] = mapped_column(Float)
    spread_ms: Mapped[float | None] = mapped_column(Float)
    samples_per_s: Mapped[float | None] = mapped_column(Float)
    host_setting: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    timing_mode: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The GPU-free answer (understudy.results.Estimate) of a row that waits for a measurement, kept once it is
    # final; SQL NULL without one (not JSON null), so that "has an estimate" is `estimate IS NOT NULL`.
    estimate: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    job_id: Mapped[str | None] = mapped_column(String(64))
    # The worker process (its lock token) that claimed the row; the reconciler re-queues it when that worker dies.
    worker_id: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_predictions_status_created", "status", "created_at"),)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(120))
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    # An admin key sees every owner's rows and manages keys; any other key sees only its own.
    admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class PredictionOwner(Base):
    """A key that asked for a prediction. The row itself is shared by everyone who asks the same thing (the result
    cache holds no owner's inputs beyond the workload and target they asked about); this says whose history it is in."""

    __tablename__ = "prediction_owners"

    prediction_id: Mapped[str] = mapped_column(String(32), ForeignKey("predictions.id", ondelete="CASCADE"),
                                               primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(32), ForeignKey("api_keys.id", ondelete="CASCADE"),
                                          primary_key=True, index=True)
    request_id: Mapped[str | None] = mapped_column(String(32), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Host(Base):
    """A worker's GPU as its last heartbeat described it."""

    __tablename__ = "hosts"

    id: Mapped[str] = mapped_column(String(120), primary_key=True)
    host_class: Mapped[str] = mapped_column(String(80), index=True)
    gpu_name: Mapped[str | None] = mapped_column(String(120))
    fingerprint: Mapped[str] = mapped_column(String(80))
    info: Mapped[dict[str, Any]]
    last_heartbeat: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Calibration(Base):
    """A user's measured latencies for one target, which the calibrated estimator fits."""

    __tablename__ = "calibrations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    target_id: Mapped[str] = mapped_column(String(80), index=True)
    base_estimator: Mapped[str] = mapped_column(String(40))
    points: Mapped[dict[str, Any]]
    parameters: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The key that owns it: only that key's requests use it (another key may name it by id).
    created_by: Mapped[str | None] = mapped_column(String(32), ForeignKey("api_keys.id"), index=True)
    # Set when a population's measurements made it (the first population of these points; the key's later ones with
    # the same measurements use it again): only populations' predictions use it, so it is never the key's latest
    # calibration of the target (None: POSTed to /v1/targets/{id}/calibrations).
    population_id: Mapped[str | None] = mapped_column(String(32), index=True)


class Population(Base):
    """A workload over a weighted device population: its predictions' ids, and once they are final, the summary."""

    __tablename__ = "populations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    request_id: Mapped[str | None] = mapped_column(String(32))  # the request that made its predictions
    workload_digest: Mapped[str] = mapped_column(String(64), index=True)
    workload: Mapped[dict[str, Any]]
    model: Mapped[str] = mapped_column(String(200), index=True)
    estimator: Mapped[str] = mapped_column(String(40))
    # [{"target_id", "target_name", "weight", "prediction_id"}, ...], one per distinct target, in request order; with
    # measurements, each also names the "calibration_id" its prediction used.
    members: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    ks: Mapped[list[int]] = mapped_column(JSON)
    # The step times the request gave ([{"target", "measured_ms", "workload"}, ...]); None when it gave none.
    measurements: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    slowest: Mapped[int] = mapped_column(default=5)
    weighting: Mapped[str] = mapped_column(String(8))  # "weight" or "count": how the request gave its devices
    status: Mapped[str] = mapped_column(String(16), index=True)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_by: Mapped[str | None] = mapped_column(String(32), ForeignKey("api_keys.id", ondelete="SET NULL"),
                                                   index=True)
