"""From ledger rows to rq jobs, and back again when Redis loses them. Shared by the API and the worker; no torch.

The ledger (Postgres) is the truth; a job only carries row ids. Every state change of a row is a conditional UPDATE
on the state last seen (ledger.predictions), so two reconcilers, or a reconciler and a request, never both queue the
same row, and a job only runs rows that still name it (worker.tasks claims `status = queued AND job_id = <its id>`).

An estimate job (enqueue_estimate) is none of that: no row names it, it claims nothing and only attaches estimates,
so the reconciler never sees it, and one that Redis loses leaves its rows to wait for their measurement without.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.rate_limit import RateLimit
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from ledger import predictions
from ledger.jobs import SERIALIZER, AllowListedJob
from ledger.queues import CPU_QUEUE, ESTIMATE_PREDICTIONS, KEY_PREFIX, RUN_PREDICTIONS, alive_key
from understudy.results import Status
from understudy.settings import Settings
from ledger.models import Prediction, utcnow

log = logging.getLogger(__name__)

# A rate-limited job is held back by rq until its owner's earlier jobs end (enqueue): it will run.
ACTIVE_JOB_STATES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED,
                     JobStatus.RATE_LIMITED}
# Workers started by `understudy worker` carry tokens with this prefix and keep alive_key(token) fresh.
WORKER_TOKEN_PREFIX = "us-"


def worker_token(slot: str, pid: int, nonce: str) -> str:
    """The token of one run of the worker for `slot` (its GPU lock's value, its rq name, a row's worker_id)."""
    return f"{WORKER_TOKEN_PREFIX}{slot}-{pid}-{nonce}"


def worker_slot(worker_id: str | None) -> str | None:
    """The worker's name as users see it everywhere (GET /v1/hosts' id, a prediction's host.worker): the slot
    "<host name>:gpu<index>" of a token made by worker_token; any other rq worker's name as it is."""
    if not worker_id or not worker_id.startswith(WORKER_TOKEN_PREFIX):
        return worker_id
    slot, pid, nonce = worker_id.removeprefix(WORKER_TOKEN_PREFIX).rsplit("-", 2)
    return slot if pid.isdigit() and nonce else worker_id


def new_job_id() -> str:
    return "pred-" + uuid.uuid4().hex


def rq_queue(redis: Redis, name: str) -> Queue:
    """One of our queues, as rq sees it: JSON jobs, allow-listed functions."""
    return Queue(name, connection=redis, serializer=SERIALIZER, job_class=AllowListedJob)


def enqueue(redis: Redis, settings: Settings, *, queue: str, prediction_ids: list[str], job_id: str,
            owner: str | None = None) -> Job:
    """Queue one job that runs these rows (one workload, one estimator, one host class) in one Engine.predict.

    A job with an owner (an API key id) keeps it in its meta, so the worker can tell admission control it started,
    and shares rq's concurrency limit with that owner's other jobs on the queue: past
    UNDERSTUDY_MAX_ACTIVE_JOBS_PER_KEY queued or running, rq holds it back until one ends. So the queue takes the
    owners in turn, and a flood from one waits behind itself (ledger/admission.py)."""
    limit = None
    if owner and settings.max_active_jobs_per_key:
        limit = RateLimit(key=f"{KEY_PREFIX}{queue}:{owner}", concurrency=settings.max_active_jobs_per_key)
    return rq_queue(redis, queue).enqueue_call(
        RUN_PREDICTIONS,
        args=(list(prediction_ids),),
        job_id=job_id,
        timeout=settings.job_timeout_s,
        result_ttl=settings.job_record_ttl_s,
        failure_ttl=settings.job_record_ttl_s,
        description=f"predict {len(prediction_ids)} target(s) on {queue}",
        meta={"owner": owner} if owner else None,
        rate_limit=limit,
    )


def enqueue_estimate(redis: Redis, settings: Settings, *, prediction_ids: list[str]) -> Job:
    """Queue, at the front of the "cpu" queue, one job that gives these rows (which wait for a GPU measurement)
    their GPU-free estimate. It goes ahead of every waiting job because it takes seconds and answers at once what
    the measurement answers later; it has no owner, so neither admission control nor rq's limit per key counts it
    (the measuring job it comes with was charged)."""
    return rq_queue(redis, CPU_QUEUE).enqueue_call(
        ESTIMATE_PREDICTIONS,
        args=(list(prediction_ids),),
        job_id="estimate-" + uuid.uuid4().hex,
        timeout=settings.job_timeout_s,
        result_ttl=settings.job_record_ttl_s,
        failure_ttl=settings.job_record_ttl_s,
        description=f"estimate {len(prediction_ids)} target(s) without a GPU",
        at_front=True,
    )


def worker_alive(redis: Redis, name: str | None) -> bool:
    """Whether the worker with this token (ours) or rq name (anyone else's) still runs."""
    if not name:
        return False
    if name.startswith(WORKER_TOKEN_PREFIX):
        return bool(redis.exists(alive_key(name)))
    return bool(redis.exists(f"rq:worker:{name}"))


@dataclass
class ReconcileReport:
    requeued: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.requeued or self.given_up)


def _lost(row: Prediction, job: Job | None, redis: Redis, alive: dict[str, bool]) -> bool:
    """Whether nothing in Redis will ever finish this queued or running row."""

    def is_alive(name: str) -> bool:
        if name not in alive:
            alive[name] = worker_alive(redis, name)
        return alive[name]

    state = job.get_status(refresh=False) if job is not None else None
    if row.status == Status.running:
        if row.worker_id and not is_alive(row.worker_id):
            return True  # its worker died mid-job (killed, machine lost)
        if job is None:
            return row.worker_id is None  # a live worker still runs it even if Redis forgot the job
        return state not in ACTIVE_JOB_STATES
    if job is None or state not in ACTIVE_JOB_STATES:
        return True  # Redis lost the job (restart, FLUSHALL) or it ended without running this row
    if state == JobStatus.STARTED and job.worker_name and job.worker_name.startswith(WORKER_TOKEN_PREFIX):
        return not is_alive(job.worker_name)  # its worker died before claiming the row
    return False


# The PostgreSQL advisory lock one reconciler holds while it runs (any constant that nothing else uses).
RECONCILER_LOCK = 0x5553_5245_434F_4E43 & 0x7FFF_FFFF_FFFF_FFFF


@contextmanager
def only_reconciler(db: Engine) -> Iterator[bool]:
    """Whether this process is now the one reconciler running, across every API and worker process.

    A reconciler commits its claim on a row before it enqueues the row's job (the job must find the claim), so a
    second reconciler looking in between would see a claimed row whose job Redis does not hold yet and claim it again.
    One at a time, through a session-level advisory lock on a connection of its own, closes that window."""
    if db.dialect.name != "postgresql":
        yield True  # SQLite: one process
        return
    with db.connect() as connection:
        got = bool(connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": RECONCILER_LOCK}))
        connection.commit()
        try:
            yield got
        finally:
            if got:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": RECONCILER_LOCK})
                connection.commit()


def reconcile(db: Engine, redis: Redis, settings: Settings, *, grace_s: float | None = None) -> ReconcileReport:
    """Re-queue ledger rows that are queued or running but that no live job will finish; fail those that keep dying.

    A queued row younger than `grace_s` (default settings.reconcile_grace_s) is left alone: its request may not have
    enqueued it yet. While another reconciler runs this one does nothing (that one does the work).
    """
    with only_reconciler(db) as alone:
        if not alone:
            return ReconcileReport()
        return _reconcile(db, redis, settings, settings.reconcile_grace_s if grace_s is None else grace_s)


def _reconcile(db: Engine, redis: Redis, settings: Settings, grace: float) -> ReconcileReport:
    report = ReconcileReport()
    now = utcnow()
    with Session(db, expire_on_commit=False) as session:
        rows = session.scalars(
            select(Prediction).where(Prediction.status.in_([Status.queued.value, Status.running.value]))
        ).all()
        rows = [r for r in rows if r.status == Status.running or (r.queued_at or r.created_at) <= now - timedelta(
            seconds=grace)]
        if not rows:
            return report
        job_ids = sorted({r.job_id for r in rows if r.job_id})
        jobs = dict(zip(job_ids, AllowListedJob.fetch_many(job_ids, connection=redis,
                                                                           serializer=SERIALIZER), strict=True))
        alive: dict[str, bool] = {}
        lost = [r for r in rows if _lost(r, jobs.get(r.job_id or ""), redis, alive)]
        groups: dict[tuple[str, str, str, str], list[Prediction]] = defaultdict(list)
        for row in lost:
            groups[(row.host_class, row.workload_digest, row.estimator, row.request_id or "")].append(row)
        for (queue, *_), members in groups.items():
            give_up = [r for r in members if r.attempts >= settings.max_attempts]
            for row in give_up:
                reason = f"gave up after {row.attempts} attempts: the worker running it died each time"
                if predictions.give_up(session, row, now=now, reason=reason):
                    report.given_up.append(row.id)
            job_id = new_job_id()
            claimed = [row.id for row in members
                       if row not in give_up and predictions.requeue_lost(session, row, job_id=job_id, now=now)]
            session.commit()
            if claimed:
                # If this fails the rows stay queued under a job Redis never saw: the next run re-queues them.
                enqueue(redis, settings, queue=queue, prediction_ids=claimed, job_id=job_id)
                report.requeued.extend(claimed)
                report.jobs.append(job_id)
    if report:
        log.warning("reconciler: re-queued %d row(s) in %d job(s), gave up on %d", len(report.requeued),
                    len(report.jobs), len(report.given_up))
    return report
