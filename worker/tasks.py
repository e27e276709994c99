"""The rq jobs: run a group of ledger rows (one workload, one estimator, one host class) through the engine once;
and give rows that wait for a GPU measurement their GPU-free estimate.

Enqueued by name ("worker.tasks.run_predictions" and "worker.tasks.estimate_predictions", ledger.queues) so the API
never imports this. Targets of one request that need the same host setting share one measurement because they go
to one Engine.predict call, which measures each distinct setting once.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from pydantic import ValidationError
from rq import get_current_job
from rq.timeouts import JobTimeoutException
from sqlalchemy import Engine as DbEngine
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from understudy.catalog import TargetSpec
from ledger.admission import job_started
from understudy.errors import UnderstudyError
from understudy.estimator_info import CALIBRATED_ESTIMATOR, ESTIMATE_ESTIMATOR
from ledger.queues import ENV_WORKER_TOKEN
from understudy.results import PredictionResult, Status
from understudy.settings import Settings, get_settings
from ledger.db import get_engine
from ledger.models import Calibration, Prediction
from ledger import predictions
from ledger.calibrations import calibration_set
from understudy.workload import Workload
from worker.measuring import MeasuringProcess, MeasuringProcessDied

log = logging.getLogger(__name__)


# A stored error is read by the user who asked: their own message, no Python class names, no unbounded text.
MAX_ERROR_CHARS = 500


def _started(job: Any, settings: Settings) -> None:
    """Tell admission control that this job left its queue (its owner has one fewer waiting)."""
    owner = (job.meta or {}).get("owner") if job is not None else None
    if not owner:
        return
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        job_started(Redis.from_url(settings.redis_url), queue=job.origin, owner=str(owner))
    except RedisError as exc:  # the count expires by itself
        log.warning("could not update the waiting count of %s: %s", owner, exc)


def _limit_s(job: Any, settings: Settings) -> float:
    """The job's time limit: its own, else UNDERSTUDY_JOB_TIMEOUT_S."""
    return float(job.timeout if job is not None and job.timeout else settings.job_timeout_s)


def run_predictions(prediction_ids: Sequence[str]) -> dict[str, Any]:
    """The rq job: predict these rows in the worker's warm measuring process (worker.measuring), or here when the
    job runs outside `understudy worker` (rq's SimpleWorker in a test, a direct call)."""
    settings = get_settings()
    job = get_current_job()
    _started(job, settings)
    job_id = job.id if job is not None else None
    limit = _limit_s(job, settings)
    ids = [str(i) for i in prediction_ids]
    measuring = measuring_process()
    if measuring is None:
        return run_claimed(ids, job_id, limit)
    db = get_engine(settings.database_url)
    try:
        return dict(measuring.run(RUN_CLAIMED, [ids, job_id, limit], timeout_s=limit, fresh=restricts_sms(db, ids)))
    except MeasuringProcessDied as exc:
        # The process never got to record a failure on the rows it held: say why here.
        if job_id is not None:
            fail_job(db, job_id, str(exc))
        raise


def run_claimed(prediction_ids: list[str], job_id: str | None, limit_s: float) -> dict[str, Any]:
    """Claim the rows still queued under this job, predict them together, write each result to its row.

    Whatever goes wrong is recorded on the claimed rows with its own message (a job that raised is a failed
    prediction, not a dead worker for the reconciler to retry)."""
    settings = get_settings()
    worker_id = os.environ.get(ENV_WORKER_TOKEN)
    db = get_engine(settings.database_url)
    rows = claim(db, prediction_ids, job_id=job_id, worker_id=worker_id)
    if not rows:
        # Another job (a duplicate from the reconciler) already ran them, or they were re-queued elsewhere.
        return {"claimed": 0}
    claimed = [row.id for row in rows]
    try:
        results = predict_rows(rows, settings)
        statuses = finish(db, rows, results)
    except JobTimeoutException:
        fail(db, claimed, f"timed out after {limit_s:g} s (the job time limit, UNDERSTUDY_JOB_TIMEOUT_S)", worker_id)
        raise
    except UnderstudyError as exc:
        fail(db, claimed, str(exc)[:MAX_ERROR_CHARS], worker_id)
        return {"claimed": len(claimed), "failed": str(exc)}
    except ValidationError as exc:  # a row written around the API, or by an older version that checked less
        reasons = "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: "
                            f"{str(error['msg']).removeprefix('Value error, ')}" for error in exc.errors()[:5])
        fail(db, claimed, f"the stored request is not valid: {reasons}"[:MAX_ERROR_CHARS], worker_id)
        return {"claimed": len(claimed), "failed": "invalid request"}
    except Exception as exc:
        log.exception("job %s failed", job_id)
        first_line = (str(exc).strip().splitlines() or [""])[0][:MAX_ERROR_CHARS]
        fail(db, claimed, "the prediction failed inside the worker (its log has the details)"
                          + (f": {first_line}" if first_line else ""), worker_id)
        raise
    return {"claimed": len(claimed), "statuses": statuses}


def estimate_predictions(prediction_ids: Sequence[str]) -> dict[str, Any]:
    """The rq job that gives rows waiting for a GPU measurement their GPU-free estimate: in the worker's warm
    measuring process (where torch is loaded already), or here outside `understudy worker`. It never fails a row:
    whatever goes wrong is logged and the rows wait for their measurement without an estimate."""
    settings = get_settings()
    job = get_current_job()
    ids = [str(i) for i in prediction_ids]
    measuring = measuring_process()
    if measuring is None:
        return estimate_rows(ids)
    try:
        return dict(measuring.run(ESTIMATE_ROWS, [ids], timeout_s=_limit_s(job, settings)))
    except (JobTimeoutException, RuntimeError) as exc:  # a job that raised, or MeasuringProcessDied
        log.warning("no estimate for %d row(s): %s", len(ids), exc)
        return {"estimated": 0}


def estimate_rows(prediction_ids: list[str]) -> dict[str, Any]:
    """Predict these rows' workload on their targets with the GPU-free estimator and attach each result to its row
    (ledger.predictions.record_estimate) while the row still waits. Claims nothing: a row already final or already
    estimated is skipped, and an estimate that cannot be made is logged and left out."""
    settings = get_settings()
    db = get_engine(settings.database_url)
    with Session(db, expire_on_commit=False) as session:
        rows = list(session.scalars(select(Prediction).where(
            Prediction.id.in_(prediction_ids), Prediction.status.in_([Status.queued.value, Status.running.value]),
            Prediction.estimate.is_(None))))
    groups: dict[str, list[Prediction]] = {}
    for row in rows:
        groups.setdefault(row.workload_digest, []).append(row)
    estimated = 0
    for members in groups.values():
        try:
            workload = Workload.model_validate(members[0].workload)
            targets = [TargetSpec.model_validate(row.target) for row in members]
            results = engine_for(settings.worker_gpu).predict(workload, targets, ESTIMATE_ESTIMATOR)
        except Exception:
            log.exception("no estimate for %d row(s) of workload %s", len(members), members[0].workload_digest)
            continue
        with Session(db) as session:
            for row, result in zip(members, results, strict=True):
                if non_finite(result) is None and predictions.record_estimate(session, row.id, result):
                    estimated += 1
            session.commit()
    return {"estimated": estimated}


# The paper's mapping: it times the step under the target's SM count, in-process by green context.
SM_RESTRICTING_ESTIMATOR = "spec"
# What the measuring process runs, by the name the worker sends it.
RUN_CLAIMED = "run_claimed"
ESTIMATE_ROWS = "estimate_rows"
CHILD_FUNCTIONS: dict[str, Callable[..., Any]] = {RUN_CLAIMED: run_claimed, ESTIMATE_ROWS: estimate_rows}


def restricts_sms(db: DbEngine, ids: list[str]) -> bool:
    """Whether these rows' estimator restricts the host's SMs in-process (spec, by green context): such a job gets
    a measuring process of its own (worker.measuring says why)."""
    settings = get_settings()
    if settings.sm_mechanism != "green-context":
        return False
    with Session(db) as session:
        estimator = session.scalars(select(Prediction.estimator).where(Prediction.id.in_(ids)).limit(1)).first()
    return estimator == SM_RESTRICTING_ESTIMATOR


def warm_up() -> None:
    """What the measuring process does before its first job: build the engine (torch, timm, the host probe) and, on
    a GPU, create the CUDA context and the math libraries' handles that every measurement needs."""
    engine = engine_for(get_settings().worker_gpu)
    import torch

    if engine.host.has_gpu and torch.cuda.is_available():
        from engine.timing import warm_up_gpu

        warm_up_gpu(engine.gpu_index)


def measuring_process() -> MeasuringProcess | None:
    """The warm measuring process of the worker this job runs in; None outside `understudy worker`."""
    return _measuring


def use_measuring_process(process: MeasuringProcess | None) -> None:
    """Run this process's jobs in `process` (the worker sets it at start-up, and clears it when it stops)."""
    global _measuring
    _measuring = process


_measuring: MeasuringProcess | None = None


def claim(db: DbEngine, ids: list[str], *, job_id: str | None, worker_id: str | None) -> list[Prediction]:
    """Mark running the rows that are still queued under this job, in the order given; the rest are not ours."""
    with Session(db, expire_on_commit=False) as session:
        got = predictions.claim(session, ids, job_id=job_id, worker_id=worker_id)
        session.commit()
        rows = {row.id: row for row in session.scalars(select(Prediction).where(Prediction.id.in_(got)))}
    return [rows[i] for i in ids if i in rows]


def predict_rows(rows: list[Prediction], settings: Settings) -> list[PredictionResult]:
    """One Engine.predict call for the group: same workload, estimator and host class by construction."""
    first = rows[0]
    if any((r.workload_digest, r.estimator) != (first.workload_digest, first.estimator) for r in rows):
        raise UnderstudyError("a job mixed workloads or estimators; each job must hold one request's group")
    workload = Workload.model_validate(first.workload)
    targets = [TargetSpec.model_validate(row.target) for row in rows]
    engine = engine_for(settings.worker_gpu)
    if first.estimator != CALIBRATED_ESTIMATOR:
        return engine.predict(workload, targets, first.estimator)
    db = get_engine(settings.database_url)
    stored = load_calibrations(db, rows, engine)
    calibrations = {target_id: calibration_set(row) for target_id, row in stored.items()}
    for row in stored.values():
        engine.fits.update((row.parameters or {}).get("fits") or {})
    results = engine.predict(workload, targets, first.estimator, calibrations=calibrations)
    try:
        save_fits(db, stored, engine)
    except SQLAlchemyError as exc:  # the results stand; the next job fits again
        log.warning("could not store the calibration fits: %s", exc)
    return results


def load_calibrations(db: DbEngine, rows: list[Prediction], engine: Any) -> dict[str, Calibration]:
    """Each row's calibration: the one the API chose for it (details.calibration_id), else the one whose points its
    version (and so its cache key) was made from. Never merely the latest: that may be another key's."""
    named = {row.target_id: str((row.details or {}).get("calibration_id") or "") for row in rows}
    wanted = {row.target_id: row.estimator_version for row in rows}
    targets = {row.target_id: TargetSpec.model_validate(row.target) for row in rows}
    with Session(db, expire_on_commit=False) as session:
        found = session.scalars(select(Calibration).where(Calibration.target_id.in_(wanted))
                                .order_by(Calibration.created_at.desc(), Calibration.id)).all()
    chosen: dict[str, Calibration] = {}
    for calibration in found:
        target_id = calibration.target_id
        if named[target_id]:
            if calibration.id == named[target_id]:
                chosen[target_id] = calibration
            continue
        try:
            identity = engine.identity(CALIBRATED_ESTIMATOR, targets[target_id],
                                       {target_id: calibration_set(calibration)})
        except UnderstudyError:
            continue
        if target_id not in chosen and identity.version == wanted[target_id]:
            chosen[target_id] = calibration
    return chosen


def save_fits(db: DbEngine, stored: dict[str, Calibration], engine: Any) -> None:
    """Keep the fits the engine made with their calibrations, so later jobs do not run the base on the points again."""
    with Session(db) as session:
        for calibration in stored.values():
            prefix = calibration_set(calibration).digest()[:16] + "/"
            fits = {key: fit for key, fit in engine.fits.items() if key.startswith(prefix)}
            known = (calibration.parameters or {}).get("fits") or {}
            if not fits or fits.keys() <= known.keys():
                continue
            current = session.get(Calibration, calibration.id, with_for_update=True)
            if current is None:
                continue
            parameters = dict(current.parameters or {})
            parameters["fits"] = {**(parameters.get("fits") or {}), **fits}
            current.parameters = parameters
        session.commit()


@lru_cache(maxsize=4)
def engine_for(gpu_index: int) -> Any:
    """The engine for this process's GPU, built (and the host probed) once per process."""
    from engine.engine import Engine

    return Engine(get_settings(), gpu_index=gpu_index)


def finish(db: DbEngine, rows: list[Prediction], results: list[PredictionResult]) -> dict[str, int]:
    """Write each result to its row, unless another job already finished that row."""
    statuses: dict[str, int] = {}
    with Session(db) as session:
        for row, result in zip(rows, results, strict=True):
            bad = non_finite(result)
            if bad:
                # The JSON columns refuse NaN and infinity, and a number that is not finite predicts nothing.
                reason = (f"the estimator's {bad} is not a finite number for this target (are the target's "
                          "specifications plausible?)")
                if predictions.fail_held(session, [row.id], reason, row.worker_id):
                    statuses[Status.failed.value] = statuses.get(Status.failed.value, 0) + 1
                continue
            if predictions.finish(session, row.id, result):
                statuses[result.status.value] = statuses.get(result.status.value, 0) + 1
        session.commit()
    return statuses


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(item) for item in value)
    return True


def non_finite(result: PredictionResult) -> str | None:
    """The first field of a result that holds NaN or an infinity, or None when every number is finite."""
    for name in ("latency_ms", "median_ms", "spread_ms", "samples_per_s", "details"):
        if not _finite(getattr(result, name)):
            return name
    if result.host_setting is not None and not _finite(result.host_setting.model_dump()):
        return "host_setting"
    return None


def fail(db: DbEngine, ids: list[str], reason: str, worker_id: str | None = None) -> int:
    """Record a failure with its reason on rows this worker still holds."""
    with Session(db) as session:
        done = predictions.fail_held(session, ids, reason, worker_id)
        session.commit()
        return done


def fail_job(db: DbEngine, job_id: str, reason: str) -> int:
    """Record a failure on every unfinished row of a job whose process died (called by the worker, not the job)."""
    with Session(db) as session:
        done = predictions.fail_job(session, job_id, reason)
        session.commit()
        return done
