"""Reading and writing prediction rows, shared by the CLI and the service."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from understudy.catalog import TargetSpec
from understudy.results import PredictionResult, Status
from ledger.models import Prediction, utcnow
from understudy.workload import Workload


def get_by_key(session: Session, cache_key: str) -> Prediction | None:
    return session.scalars(select(Prediction).where(Prediction.cache_key == cache_key)).first()


def new_row(*, cache_key: str, workload: Workload, target: TargetSpec, estimator: str, version: str,
            host_class: str, status: Status = Status.queued, request_id: str | None = None) -> Prediction:
    return Prediction(
        cache_key=cache_key,
        request_id=request_id,
        workload_digest=workload.digest(),
        workload=workload.canonical(),
        model=workload.model,
        target_id=target.id,
        target=target.model_dump(mode="json"),
        estimator=estimator,
        estimator_version=version,
        host_class=host_class,
        status=status.value,
    )


def apply_result(row: Prediction, result: PredictionResult) -> None:
    """Copy a finished result into its ledger row."""
    fields: dict[str, Any] = {
        "status": result.status.value,
        "latency_ms": result.latency_ms,
        "median_ms": result.median_ms,
        "spread_ms": result.spread_ms,
        "samples_per_s": result.samples_per_s,
        "host_setting": result.host_setting.model_dump() if result.host_setting else None,
        "timing_mode": result.timing_mode,
        "host_fingerprint": result.host_fingerprint,
        "host_name": result.host_name,
        "error": result.error,
        "details": result.details,
        "finished_at": utcnow(),
    }
    for key, value in fields.items():
        setattr(row, key, value)


def to_result(row: Prediction) -> PredictionResult:
    from understudy.results import HostSetting

    return PredictionResult(
        workload_digest=row.workload_digest,
        target_id=row.target_id,
        estimator=row.estimator,
        estimator_version=row.estimator_version,
        status=Status(row.status),
        latency_ms=row.latency_ms,
        median_ms=row.median_ms,
        spread_ms=row.spread_ms,
        samples_per_s=row.samples_per_s,
        host_setting=HostSetting.model_validate(row.host_setting) if row.host_setting else None,
        timing_mode=row.timing_mode or "none",  # type: ignore[arg-type]
        host_fingerprint=row.host_fingerprint or row.host_class,
        host_name=row.host_name,
        error=row.error,
        details=row.details or {},
    )
