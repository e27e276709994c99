"""Every state change of a prediction row: the one module that writes `predictions`, for the API, the worker
service, the reconciler and the CLI's local cache.

    (new) --insert_queued--> queued --claim--> running --finish--> done | oom | failed
    queued | running --requeue_lost--> queued      (the reconciler: its job or its worker is gone)
    queued | running --give_up, fail_job--> failed (it kept losing its worker; its job's process died)
    running --fail_held--> failed                  (the job that holds it raised)
    failed --requeue_failed--> queued              (asked again: a failure is not cached)
    queued | running --record_estimate--> the same state, carrying an estimate (shown as "estimated")

`record_estimate` attaches a GPU-free estimate (understudy.results.Estimate) to a row that waits for a measurement;
it changes neither the status nor the job, so every other transition holds as drawn, and `finish` keeps the
estimate beside the result. A final row never takes one: a measurement that landed first wins.

Each transition holds only in the state the caller last saw (an UPDATE guarded by status, job and worker; an INSERT
that skips an existing key; a locked read before a result is written), so two reconcilers, or a reconciler and a
request, never both move the same row, and a job only runs rows that still name it. The
caller owns the session and commits. `save_result` is the CLI's: one process, no queue, an upsert by cache key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from understudy.catalog import TargetSpec
from understudy.keys import CacheIdentity
from understudy.results import RESULT_ROW_COLUMNS, Estimate, PredictionResult, Status
from ledger.models import Prediction, new_id, utcnow
from understudy.workload import Workload

# The columns a result fills, cleared when a failed row is asked again.
RESULT_COLUMNS = ("latency_ms", "median_ms", "spread_ms", "samples_per_s", "host_setting", "timing_mode", "error",
                  "details", "worker_id", "started_at", "finished_at", "host_fingerprint", "host_name")


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
        "details": result.stored_details(),
        "finished_at": utcnow(),
    }
    for key, value in fields.items():
        setattr(row, key, value)


def to_result(row: Prediction) -> PredictionResult:
    return PredictionResult.from_columns({name: getattr(row, name) for name in RESULT_ROW_COLUMNS})


# --- the service's transitions -----------------------------------------------------------------------------------


def insert_queued(session: Session, rows: list[Prediction], *, job_id: str, now: datetime) -> list[str]:
    """Insert new rows queued under `job_id`; a row whose cache key exists already (a concurrent identical request
    inserted it first) is skipped. The ids inserted, which the caller's job then runs. Postgres only."""
    if not rows:
        return []
    values = [{column.key: getattr(row, column.key) for column in Prediction.__table__.columns}
              | {"id": new_id(), "job_id": job_id, "attempts": 0, "created_at": now, "queued_at": now}
              for row in rows]
    return list(session.scalars(
        insert(Prediction).values(values).on_conflict_do_nothing(index_elements=["cache_key"])
        .returning(Prediction.id)
    ).all())


def requeue_failed(session: Session, cache_keys: list[str], *, job_id: str, request_id: str,
                   now: datetime, details: Mapping[str, dict[str, Any]] | None = None) -> list[str]:
    """Queue again the rows of these keys that are still failed, cleared of their result; the ids queued.
    `details` (by cache key) is what a re-queued row's job must read from it (the calibration it uses)."""
    if not cache_keys:
        return []
    # The estimate stays (it is not among RESULT_COLUMNS): it describes the workload on the target, not the attempt
    # that failed, so the row shows it again at once while it waits for its new measurement.
    queued = list(session.scalars(
        update(Prediction)
        .where(Prediction.cache_key.in_(cache_keys), Prediction.status == Status.failed.value)
        .values(status=Status.queued.value, job_id=job_id, request_id=request_id, attempts=0, queued_at=now,
                **{name: None for name in RESULT_COLUMNS})
        .returning(Prediction.id)
    ).all())
    for key, value in (details or {}).items():
        # Only rows this call queued: another request's job may have taken a row first.
        session.execute(update(Prediction).where(Prediction.cache_key == key, Prediction.job_id == job_id)
                        .values(details=value))
    return queued


def _as_seen(row: Prediction) -> list[Any]:
    """The row is still in the state the caller read: same status, same job."""
    return [Prediction.id == row.id, Prediction.status == row.status,
            Prediction.job_id.is_not_distinct_from(row.job_id)]


def requeue_lost(session: Session, row: Prediction, *, job_id: str, now: datetime) -> bool:
    """Queue a row that no live job will finish under a new job; False if it moved on since it was read."""
    done = session.execute(
        update(Prediction).where(*_as_seen(row))
        .values(status=Status.queued.value, job_id=job_id, worker_id=None, started_at=None, queued_at=now)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]  # Result of an UPDATE is a CursorResult


def give_up(session: Session, row: Prediction, *, now: datetime, reason: str) -> bool:
    """Fail a row that keeps losing its worker; False if it moved on since it was read."""
    done = session.execute(
        update(Prediction).where(*_as_seen(row))
        .values(status=Status.failed.value, finished_at=now, error=reason)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]  # Result of an UPDATE is a CursorResult


def claim(session: Session, ids: list[str], *, job_id: str | None, worker_id: str | None) -> list[str]:
    """Mark running the rows that are still queued under this job (any job when `job_id` is None); the ids taken."""
    conditions = [Prediction.id.in_(ids), Prediction.status == Status.queued.value]
    if job_id is not None:
        conditions.append(Prediction.job_id == job_id)
    return list(session.scalars(
        update(Prediction)
        .where(*conditions)
        .values(status=Status.running.value, worker_id=worker_id, started_at=utcnow(),
                attempts=Prediction.attempts + 1)
        .returning(Prediction.id)
    ).all())


def finish(session: Session, row_id: str, result: PredictionResult) -> bool:
    """Write a result to its row unless another job finished the row first. A result made by another version than
    the row's (a worker upgraded since the request) keeps the row's key and says so in its details."""
    current = session.get(Prediction, row_id, with_for_update=True)
    if current is None or Status(current.status).final:
        return False
    apply_result(current, result)
    if result.estimator_version != current.estimator_version:
        current.details = {**(current.details or {}), "ran_estimator_version": result.estimator_version}
    return True


def record_estimate(session: Session, row_id: str, result: PredictionResult) -> bool:
    """Attach the estimate a GPU-free result gives to a row that is not final yet (replacing an earlier one); False
    when the row is final or gone (its measurement landed first and stays the answer), or the result is a failure."""
    estimate = Estimate.of(result)
    if estimate is None:
        return False
    # Guarded by status in one UPDATE: one racing `finish` (which locks the row) is waited for and then seen.
    done = session.execute(
        update(Prediction)
        .where(Prediction.id == row_id, Prediction.status.in_([Status.queued.value, Status.running.value]))
        .values(estimate=estimate.model_dump(mode="json"))
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]  # Result of an UPDATE is a CursorResult


def fail_held(session: Session, ids: list[str], reason: str, worker_id: str | None) -> int:
    """Fail, with its reason, each of these rows that this worker still runs."""
    done = session.execute(
        update(Prediction)
        .where(Prediction.id.in_(ids), Prediction.status == Status.running.value,
               Prediction.worker_id.is_not_distinct_from(worker_id))
        .values(status=Status.failed.value, error=reason, finished_at=utcnow())
    )
    return int(done.rowcount)  # type: ignore[attr-defined]  # Result of an UPDATE is a CursorResult


def fail_job(session: Session, job_id: str, reason: str) -> int:
    """Fail every unfinished row of a job whose process died."""
    done = session.execute(
        update(Prediction)
        .where(Prediction.job_id == job_id, Prediction.status.in_([Status.queued.value, Status.running.value]))
        .values(status=Status.failed.value, error=reason, finished_at=utcnow())
    )
    return int(done.rowcount)  # type: ignore[attr-defined]  # Result of an UPDATE is a CursorResult


# --- the CLI's local cache ---------------------------------------------------------------------------------------


def save_result(session: Session, *, cache_key: str, workload: Workload, target: TargetSpec,
                identity: CacheIdentity, result: PredictionResult) -> None:
    """Store a one-shot prediction under its key, replacing what was there (a failure, or nothing)."""
    row = get_by_key(session, cache_key) or new_row(cache_key=cache_key, workload=workload, target=target,
                                                    estimator=identity.estimator, version=identity.version,
                                                    host_class=identity.host_key)
    apply_result(row, result)
    session.add(row)
