"""Reading and writing the ledger for the API. Keyword-only functions; no HTTP here, no GPU code anywhere.

A POST turns into rows with INSERT ... ON CONFLICT (cache_key) DO NOTHING: whichever of two identical requests
inserts first queues the job, the other finds the row. Rows are committed before their job is enqueued. Rows queued
for a GPU measurement are given a GPU-free estimate first (estimate_waiting).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import and_, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.errors import Conflict, FieldError, NotFound, ServiceUnavailable, TooManyRequests
from app.schemas import CalibrationCreate, PopulationCreate, PredictionCreate
from app.security import Caller
from ledger.admission import admit, calibrated_seconds, estimate_seconds, job_started
from understudy.calibration import CalibrationSet
from understudy.catalog import InlineTarget, TargetSpec, resolve_target
from ledger.dispatch import enqueue, enqueue_estimate, new_job_id, rq_queue
from understudy.estimator_info import (CALIBRATED_ESTIMATOR, DEFAULT_CPU_ESTIMATOR, DEFAULT_GPU_ESTIMATOR,
                                       ESTIMATE_ESTIMATOR, estimator_info, estimator_version)
from understudy.keys import CacheIdentity, cache_identity, cache_key
from understudy.populations import DeviceLatency, ExcludedDevice, PopulationSummary, summarize
from ledger.queues import CPU_QUEUE, GPU_QUEUE_PREFIX, alive_key, is_gpu_queue
from understudy.results import Estimate, Status
from understudy.settings import Settings
from ledger.models import Calibration, Host, Population, Prediction, PredictionOwner, new_id, utcnow
from ledger.calibrations import calibration_digest, calibration_set
from ledger.predictions import insert_queued, new_row, record_estimate, requeue_failed, to_result
from understudy.workload import Workload

log = logging.getLogger(__name__)

CACHED_STATES = (Status.done.value, Status.oom.value)
WAITING_STATES = (Status.queued.value, Status.running.value)
ANONYMOUS = "anonymous"  # the owner admission control charges when the service runs without keys


def visible_owner(caller: Caller | None) -> str | None:
    """Whose rows a caller sees: a key its own; None (every row) for an admin key, or for a reader without a key
    where the operator left reads open (UNDERSTUDY_READ_REQUIRES_KEY=false)."""
    if caller is None or caller.admin:
        return None
    return caller.key_id


# --- hosts ------------------------------------------------------------------------------------------------------


def list_hosts(*, session: Session) -> list[Host]:
    return list(session.scalars(select(Host).order_by(Host.id)))


def db_now(*, session: Session) -> datetime:
    """The database's clock: workers stamp their heartbeats with it, so a skewed machine clock cannot age them."""
    now: datetime = session.execute(select(func.now())).scalar_one()
    return now


def host_is_alive(host: Host, settings: Settings, now: datetime) -> bool:
    return host.last_heartbeat >= now - timedelta(seconds=settings.host_stale_s)


def find_host(*, session: Session, ref: str) -> Host | None:
    """A registered host by id ("box:gpu0"), fingerprint or host class ("gpu:<fingerprint>"), latest first."""
    return session.scalars(
        select(Host).where(or_(Host.id == ref, Host.fingerprint == ref, Host.host_class == ref))
        .order_by(Host.last_heartbeat.desc())
    ).first()


def live_gpu_hosts(*, session: Session, settings: Settings) -> list[Host]:
    return list(session.scalars(
        select(Host).where(Host.host_class.startswith(GPU_QUEUE_PREFIX),
                           Host.last_heartbeat >= func.now() - timedelta(seconds=settings.host_stale_s))
        .order_by(Host.id)
    ))


def queue_depths(redis: Redis, names: list[str]) -> dict[str, int]:
    return {name: rq_queue(redis, name).count for name in names}


def has_live_worker(*, session: Session, redis: Redis, settings: Settings, queue: str) -> bool:
    """Whether a worker that serves this queue is alive now: a fresh heartbeat in the hosts table and its liveness
    key in Redis (which expires UNDERSTUDY_LOCK_TTL_S after the worker stops refreshing it)."""
    fresh = session.scalars(select(Host).where(
        Host.last_heartbeat >= func.now() - timedelta(seconds=settings.host_stale_s))).all()
    tokens = [str(host.info.get("lock_token")) for host in fresh
              if queue in ((host.info or {}).get("queues") or [host.host_class])
              and (host.info or {}).get("lock_token")]
    return any(redis.exists(alive_key(token)) for token in tokens)


# --- where a request goes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    identity: CacheIdentity  # what the predictions record, and their cache keys hold
    host_class: str  # the queue
    gpu_fingerprint: str | None  # the GPU host that measures; None for an estimator that touches no GPU

    @property
    def estimator(self) -> str:
        return self.identity.estimator


def _advertised_version(host: Host, estimator: str) -> str | None:
    advertised = (host.info or {}).get("estimators")
    if not isinstance(advertised, dict):
        return None
    if estimator not in advertised:
        raise Conflict(f"host {host.id} does not run estimator {estimator!r} (it runs {', '.join(advertised)})")
    return str(advertised[estimator].get("version"))


def _on_host(host: Host, estimator: str, settings: Settings) -> Placement:
    version = _advertised_version(host, estimator) or estimator_version(estimator, settings)
    return Placement(cache_identity(estimator, version, host.fingerprint), host.host_class, host.fingerprint)


def cpu_placement(*, settings: Settings, request: PredictionCreate) -> Placement | None:
    """The placement of a request that names an estimator touching no GPU and no host (and no calibration): it
    needs no query. None for any other request (place() decides those)."""
    if request.host is not None or request.estimator is None or request.calibration is not None:
        return None
    info = estimator_info(request.estimator)
    if info.needs_gpu or info.name == CALIBRATED_ESTIMATOR:
        return None
    return _anywhere(info.name, settings)


def _anywhere(estimator: str, settings: Settings) -> Placement:
    # The same answer on every host: any worker may compute it, and the cache key names no host.
    return Placement(cache_identity(estimator, estimator_version(estimator, settings), None), CPU_QUEUE, None)


def place(*, session: Session, redis: Redis, settings: Settings, request: PredictionCreate, workload: Workload,
          specs: list[TargetSpec]) -> Placement:
    """The estimator, its version and the host class: CPU estimators go to "cpu"; GPU ones to a registered GPU host."""
    explicit = None
    if request.host is not None:
        explicit = find_host(session=session, ref=request.host)
        if explicit is None:
            raise Conflict(f"no worker has registered host {request.host!r}; GET /v1/hosts lists the hosts")
    # The live GPU hosts are a query: asked only when the answer depends on them (not for a CPU estimator, the
    # cache hit under load).
    live: list[Host] | None = None
    name = request.estimator
    if name is None:
        if explicit is not None:
            has_gpu = is_gpu_queue(explicit.host_class)
        else:
            live = live_gpu_hosts(session=session, settings=settings)
            has_gpu = bool(live)
        name = DEFAULT_GPU_ESTIMATOR if has_gpu else DEFAULT_CPU_ESTIMATOR
    info = estimator_info(name)
    if not info.needs_gpu:
        return _anywhere(name, settings)
    if explicit is not None:
        if not is_gpu_queue(explicit.host_class):
            raise Conflict(f"host {explicit.id} has no GPU; estimator {name!r} times the workload on one")
        return _on_host(explicit, name, settings)
    if live is None:
        live = live_gpu_hosts(session=session, settings=settings)
    if not live:
        raise Conflict(f"estimator {name!r} times the workload on a GPU and no GPU worker is registered (none sent a "
                       f"heartbeat in the last {settings.host_stale_s:g} s); start `understudy worker --gpu N` on a "
                       f"GPU machine, or ask for estimator {DEFAULT_CPU_ESTIMATOR!r}")
    # Several GPU host classes: prefer one that already holds these results, then the shortest queue.
    by_class: dict[str, Host] = {}
    for host in live:
        by_class.setdefault(host.host_class, host)
    if len(by_class) == 1:
        return _on_host(next(iter(by_class.values())), name, settings)
    depths = queue_depths(redis, list(by_class))
    scored = []
    for host_class_, host in by_class.items():
        placement = _on_host(host, name, settings)
        keys = [cache_key(workload, spec, placement.identity) for spec in specs]
        held = session.scalar(select(func.count()).select_from(Prediction).where(
            Prediction.cache_key.in_(keys), Prediction.status.in_(CACHED_STATES))) or 0
        scored.append((-held, depths.get(host_class_, 0), host_class_, placement))
    return min(scored, key=lambda item: item[:3])[3]


def place_calibrated(*, session: Session, redis: Redis, settings: Settings, request: PredictionCreate,
                     workload: Workload, specs: list[TargetSpec], caller: Caller | None,
                     given: dict[str, Calibration] | None = None,
                     ) -> tuple[Placement, list[CacheIdentity], list[Calibration]]:
    """The calibrated estimator goes where its base goes; each target's identity names the calibration it uses: the
    one `given` for it (a population's), else the one the request names by id for its target, else the caller's own
    latest for that target (never another key's)."""
    if given is not None:
        found = dict(given)
    else:
        found = latest_calibrations(session=session, target_ids=[spec.id for spec in specs],
                                    owner=caller.key_id if caller is not None else None)
    if request.calibration is not None:
        named = session.get(Calibration, request.calibration)
        if named is None:
            raise NotFound(f"no calibration with id {request.calibration!r}")
        if named.target_id not in {spec.id for spec in specs}:
            raise FieldError("calibration", f"calibration {named.id} is of target {named.target_id}, which is not "
                                            "among the request's targets")
        found[named.target_id] = named
    missing = list({spec.id: spec for spec in specs if spec.id not in found}.values())
    if missing:
        named_missing = ", ".join(f"{spec.name} ({spec.id})" for spec in missing)
        raise Conflict(f"estimator 'calibrated' needs a calibration of each target and {named_missing} has none of "
                       f"yours: POST a few measured step times to /v1/targets/{missing[0].id}/calibrations first "
                       "(catalog targets only), name one by its id in \"calibration\", or ask for another estimator")
    bases = sorted({found[spec.id].base_estimator for spec in specs})
    if len(bases) > 1:
        raise Conflict(f"the targets' calibrations correct different base estimators ({', '.join(bases)}); ask for "
                       "the targets of each base in a request of its own")
    base = place(session=session, redis=redis, settings=settings, request=request.model_copy(
        update={"estimator": bases[0]}), workload=workload, specs=specs)
    identities = [cache_identity(base.identity.estimator, base.identity.version, base.gpu_fingerprint,
                                 calibration_digest(found[spec.id])) for spec in specs]
    placement = Placement(cache_identity(CALIBRATED_ESTIMATOR, estimator_version(CALIBRATED_ESTIMATOR, settings),
                                         base.gpu_fingerprint), base.host_class, base.gpu_fingerprint)
    return placement, identities, [found[spec.id] for spec in specs]


# --- predictions ------------------------------------------------------------------------------------------------


@dataclass
class Created:
    request_id: str
    rows: list[Prediction]  # one per target, in request order (a repeated target repeats its row)
    cached: list[bool]
    queued_job: str | None

    @property
    def all_cached(self) -> bool:
        return all(self.cached)

    @property
    def all_final(self) -> bool:
        return all(Status(row.status).final for row in self.rows)


def resolve_targets(items: list[str | InlineTarget], settings: Settings) -> list[TargetSpec]:
    if len(items) > settings.max_targets:
        raise FieldError("targets", f"at most {settings.max_targets} targets per request (UNDERSTUDY_MAX_TARGETS)")
    return [resolve_target(item) for item in items]


def cache_keys_at_once(*, settings: Settings, request: PredictionCreate) -> list[str] | None:
    """The cache keys of a request's targets, in order, when they need no query to know (cpu_placement); else None.
    With them the API can answer a repeated request from what it remembers (app.finished)."""
    placement = cpu_placement(settings=settings, request=request)
    if placement is None:
        return None
    specs = resolve_targets(list(request.targets), settings)
    return [cache_key(request.workload, spec, placement.identity) for spec in specs]


def check_queue(*, session: Session, redis: Redis, settings: Settings, queue: str) -> None:
    """503 when nothing would run a job put on this queue now."""
    if settings.require_live_worker and not has_live_worker(session=session, redis=redis, settings=settings,
                                                            queue=queue):
        raise ServiceUnavailable(f"no live worker serves queue {queue!r}, so the job would wait for nobody; start "
                                 "`understudy worker` (or try again once one runs)", retry_after_s=30)


def charge(*, redis: Redis, settings: Settings, owner: str, queue: str, cost_s: float) -> None:
    """Admit one job of `cost_s` estimated worker seconds for this owner, or raise 429 (this owner's limits) or 503
    (the queue is full)."""
    admission = admit(redis, owner=owner, queue=queue, cost_s=cost_s, budget_s=settings.work_budget_s,
                      window_s=settings.work_window_s, max_waiting=settings.max_waiting_jobs_per_key,
                      waiting_ttl_s=max(settings.job_timeout_s, settings.work_window_s) * 2,
                      max_depth=settings.max_queue_depth)
    if admission.admitted:
        return
    if admission.reason == "full":
        raise ServiceUnavailable(f"queue {queue!r} holds {settings.max_queue_depth} waiting jobs "
                                 "(UNDERSTUDY_MAX_QUEUE_DEPTH); try again later", retry_after_s=30)
    if admission.reason == "waiting":
        raise TooManyRequests(f"this key already has {settings.max_waiting_jobs_per_key} jobs waiting "
                              f"(UNDERSTUDY_MAX_WAITING_JOBS_PER_KEY); try again when they have run",
                              retry_after_s=min(admission.retry_after_s, 60))
    raise TooManyRequests(f"this key has used its budget of {settings.work_budget_s:g} s of estimated worker time "
                          f"per {settings.work_window_s:g} s (UNDERSTUDY_WORK_BUDGET_S; this request needs about "
                          f"{cost_s:.0f} s); try again in {admission.retry_after_s} s",
                          retry_after_s=admission.retry_after_s)


def record_owner(*, session: Session, caller: Caller | None, rows: list[Prediction], request_id: str) -> None:
    """Put the rows in the caller's history (a cached row is shared: it gains one more owner)."""
    if caller is None or not rows:
        return
    ids = list(dict.fromkeys(row.id for row in rows))
    # A repeated request (the hot path: a cached answer asked for again) writes nothing and commits nothing.
    owned = set(session.scalars(select(PredictionOwner.prediction_id).where(
        PredictionOwner.owner_id == caller.key_id, PredictionOwner.prediction_id.in_(ids))))
    now = utcnow()
    values = [{"prediction_id": row_id, "owner_id": caller.key_id, "request_id": request_id, "created_at": now}
              for row_id in ids if row_id not in owned]
    if values:
        session.execute(insert(PredictionOwner).values(values).on_conflict_do_nothing())
        session.commit()


def create_predictions(*, session: Session, redis: Redis, settings: Settings, request: PredictionCreate,
                       caller: Caller | None = None, given: dict[str, Calibration] | None = None) -> Created:
    """Serve cached results, admit and insert the missing rows (exactly once, whatever runs concurrently), queue
    one job; every row goes into the caller's history. `given`: with estimator calibrated, the calibration of each
    target by id (a population's), in place of the caller's latest."""
    workload = request.workload
    specs = resolve_targets(list(request.targets), settings)
    calibrations: list[Calibration] | None = None
    if request.estimator == CALIBRATED_ESTIMATOR:
        placement, identities, calibrations = place_calibrated(session=session, redis=redis, settings=settings,
                                                               request=request, workload=workload, specs=specs,
                                                               caller=caller, given=given)
    else:
        if request.calibration is not None:
            raise FieldError("calibration", "a calibration applies only with estimator 'calibrated'")
        placement = place(session=session, redis=redis, settings=settings, request=request, workload=workload,
                          specs=specs)
        identities = [placement.identity] * len(specs)
    keys = [cache_key(workload, spec, identity) for spec, identity in zip(specs, identities, strict=True)]
    identity_of = dict(zip(keys, identities, strict=True))
    calibration_of = dict(zip(keys, calibrations, strict=True)) if calibrations is not None else {}
    request_id = uuid.uuid4().hex

    before = {row.cache_key: row for row in session.scalars(select(Prediction).where(Prediction.cache_key.in_(keys)))}
    cached = [key in before and before[key].status in CACHED_STATES for key in keys]
    if all(cached):
        rows_ = [before[key] for key in keys]
        record_owner(session=session, caller=caller, rows=rows_, request_id=request_id)
        return Created(request_id, rows_, cached, None)
    redis.ping()  # answer 503 before writing anything when the queue is down

    unique: dict[str, TargetSpec] = {}
    for key, spec in zip(keys, specs, strict=True):
        unique.setdefault(key, spec)
    to_run = [key for key in unique if key not in before or before[key].status == Status.failed.value]
    owner = caller.key_id if caller is not None else ANONYMOUS
    if to_run:
        check_queue(session=session, redis=redis, settings=settings, queue=placement.host_class)
        if calibrations is None:
            cost_s = estimate_seconds(workload, placement.estimator, len(to_run))
        else:
            unfitted = {row.id: (row.target_id, calibration_set(row)) for row in calibrations
                        if not (row.parameters or {}).get("fits")}
            cost_s = calibrated_seconds(workload, calibrations[0].base_estimator, len(to_run),
                                        list(unfitted.values()))
        charge(redis=redis, settings=settings, owner=owner, queue=placement.host_class, cost_s=cost_s)

    now = utcnow()
    job_id = new_job_id()
    fresh = [new_row(cache_key=key, workload=workload, target=unique[key], estimator=identity_of[key].estimator,
                     version=identity_of[key].version, host_class=placement.host_class, request_id=request_id)
             for key in sorted(unique) if key not in before]  # one lock order for every request: no deadlock
    for row in fresh:
        if row.cache_key in calibration_of:
            # The job uses exactly this calibration (the worker never picks one by itself).
            row.details = {"calibration_id": calibration_of[row.cache_key].id}
    ours = insert_queued(session, fresh, job_id=job_id, now=now)
    # A failed result is not cached: asking again runs it again (once, however many ask at the same moment).
    retry = sorted(key for key in unique if key in before and before[key].status == Status.failed.value)
    ours += requeue_failed(session, retry, job_id=job_id, request_id=request_id, now=now,
                           details={key: {"calibration_id": calibration_of[key].id}
                                    for key in retry if key in calibration_of})
    session.commit()
    if ours and placement.gpu_fingerprint is not None:
        # Before the measuring job: an idle worker that serves both queues wakes to whichever is pushed first.
        estimate_waiting(session=session, redis=redis, settings=settings, workload=workload, specs=unique, ids=ours)

    rows = {row.cache_key: row for row in session.scalars(
        select(Prediction).where(Prediction.cache_key.in_(keys)).execution_options(populate_existing=True))}
    queued_job = None
    if ours:
        mine = set(ours)
        ordered = [rows[key].id for key in dict.fromkeys(keys) if rows[key].id in mine]
        # Should this fail, the rows wait in the ledger and the reconciler queues them once Redis is back.
        enqueue(redis, settings, queue=placement.host_class, prediction_ids=ordered, job_id=job_id, owner=owner)
        queued_job = job_id
    elif to_run:
        job_started(redis, queue=placement.host_class, owner=owner)  # another request queued them: nothing waits
    record_owner(session=session, caller=caller, rows=list(rows.values()), request_id=request_id)
    return Created(request_id, [rows[key] for key in keys], cached, queued_job)


def estimate_waiting(*, session: Session, redis: Redis, settings: Settings, workload: Workload,
                     specs: dict[str, TargetSpec], ids: list[str]) -> None:
    """Give rows just queued for a GPU measurement (ids; their targets by cache key in `specs`) a GPU-free estimate:
    at once from a finished prediction of the same workload and target by the estimate's estimator, whose cache key
    names no host, else through one estimate job at the front of the "cpu" queue. A row that kept its estimate
    through a retry needs none. Never fails the request: without Redis the rows just wait for their measurement."""
    waiting = list(session.scalars(select(Prediction).where(Prediction.id.in_(ids), Prediction.estimate.is_(None))))
    if not waiting:
        return
    identity = _anywhere(ESTIMATE_ESTIMATOR, settings).identity
    source_key = {row.id: cache_key(workload, specs[row.cache_key], identity) for row in waiting}
    held = {row.cache_key: row for row in session.scalars(select(Prediction).where(
        Prediction.cache_key.in_(set(source_key.values())), Prediction.status.in_(CACHED_STATES)))}
    missing = set()
    for row in waiting:
        source = held.get(source_key[row.id])
        if source is None:
            missing.add(row.id)
        else:
            record_estimate(session, row.id, to_result(source))
    session.commit()
    if not missing:
        return
    try:
        enqueue_estimate(redis, settings, prediction_ids=[i for i in ids if i in missing])
    except RedisError as exc:
        log.warning("no estimate job for %d row(s): %s", len(missing), exc)


def owned_by(owner: str) -> Any:
    """Predictions in this owner's history."""
    return Prediction.id.in_(select(PredictionOwner.prediction_id).where(PredictionOwner.owner_id == owner))


def get_prediction(*, session: Session, prediction_id: str, owner: str | None = None) -> Prediction | None:
    """The row, if the owner (None: anyone) has it in its history."""
    if owner is None:
        return session.get(Prediction, prediction_id)
    return session.scalars(select(Prediction).where(Prediction.id == prediction_id, owned_by(owner))).first()


@dataclass
class PredictionFilters:
    model: str | None = None
    target: str | None = None
    host: str | None = None
    estimator: str | None = None
    status: Status | None = None
    since: datetime | None = None
    until: datetime | None = None
    workload_digest: str | None = None
    request_id: str | None = None
    q: str | None = None  # free text: a substring of the model, target, estimator, host, status, id or error
    owner: str | None = None  # only this key's history (None: every row)

    def conditions(self) -> list[Any]:
        out: list[Any] = []
        if self.owner is not None:
            out.append(owned_by(self.owner))
        if self.workload_digest:
            out.append(Prediction.workload_digest == self.workload_digest)
        if self.request_id:
            out.append(Prediction.request_id == self.request_id)
        if self.q:
            out.append(search_condition(self.q))
        if self.model:
            out.append(Prediction.model == self.model)
        if self.target:
            out.append(Prediction.target_id == self.target)
        if self.host:
            out.append(or_(Prediction.host_class == self.host, Prediction.host_fingerprint == self.host,
                           Prediction.host_name == self.host, Prediction.worker_id.startswith(f"us-{self.host}")))
        if self.estimator:
            out.append(Prediction.estimator == self.estimator)
        if self.status:
            out.append(status_condition(self.status))
        if self.since:
            out.append(Prediction.created_at >= self.since)
        if self.until:
            out.append(Prediction.created_at < self.until)
        return out


def status_condition(status: Status) -> Any:
    """Rows a reader is shown with this status (understudy.results.shown_status): `estimated` is a queued or running
    row that carries an estimate, so `queued` and `running` are those rows without one."""
    if status == Status.estimated:
        return and_(Prediction.status.in_(WAITING_STATES), Prediction.estimate.is_not(None))
    if status.value in WAITING_STATES:
        return and_(Prediction.status == status.value, Prediction.estimate.is_(None))
    return Prediction.status == status.value


def list_predictions(*, session: Session, filters: PredictionFilters, skip: int = 0, limit: int = 100,
                     sort: str = "created_at", descending: bool = True) -> tuple[list[Prediction], int]:
    conditions = filters.conditions()
    count = session.scalar(select(func.count()).select_from(Prediction).where(*conditions)) or 0
    column = SORT_COLUMNS[sort]
    order = column.desc().nulls_last() if descending else column.asc().nulls_last()
    rows = session.scalars(
        select(Prediction).where(*conditions).order_by(order, Prediction.created_at.desc(), Prediction.id)
        .offset(skip).limit(limit)
    ).all()
    return list(rows), int(count)



# --- history: search and sort -----------------------------------------------------------------------------------

SORT_COLUMNS: dict[str, Any] = {
    "created_at": Prediction.created_at,
    "model": Prediction.model,
    "target": Prediction.target_id,
    "estimator": Prediction.estimator,
    "status": Prediction.status,
    "host": Prediction.host_class,
    "latency": Prediction.latency_ms,
    "samples_per_s": Prediction.samples_per_s,
}


def search_condition(text: str) -> Any:
    """Rows where any of the words people search by contains the text (case-insensitive, no wildcards)."""
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    columns = (Prediction.model, Prediction.target_id, Prediction.target["name"].as_string(), Prediction.estimator,
               Prediction.status, Prediction.host_class, Prediction.host_name, Prediction.id, Prediction.request_id,
               Prediction.error)
    return or_(*(column.ilike(pattern, escape="\\") for column in columns))


# --- populations ------------------------------------------------------------------------------------------------


def create_population(*, session: Session, redis: Redis, settings: Settings, request: PopulationCreate,
                      caller: Caller | None) -> tuple[Population, dict[str, Prediction]]:
    """Merge the devices by target, predict every distinct target in one request, record the population."""
    merged: dict[str, tuple[str | InlineTarget, TargetSpec, float]] = {}
    for device in request.devices:
        spec = resolve_target(device.target)
        # The schema requires exactly one of count and weight, so this is never float(None).
        amount = float(device.count if device.count is not None else device.weight)  # type: ignore[arg-type]
        item, _, before = merged.get(spec.id, (device.target, spec, 0.0))
        merged[spec.id] = (item, spec, before + amount)
    if len(merged) > settings.max_targets:
        raise FieldError("devices", f"at most {settings.max_targets} distinct targets per population "
                                    "(UNDERSTUDY_MAX_TARGETS)")
    population_id = new_id()
    estimator, calibrations = request.estimator, None
    if request.measurements:
        estimator = CALIBRATED_ESTIMATOR
        calibrations = measured_calibrations(session=session, settings=settings, request=request,
                                             specs=[spec for _, spec, _ in merged.values()],
                                             population_id=population_id, caller=caller)
    created = create_predictions(session=session, redis=redis, settings=settings, request=PredictionCreate(
        workload=request.workload, targets=[item for item, _, _ in merged.values()], estimator=estimator,
        host=request.host), caller=caller, given=calibrations)
    members = [{"target_id": spec.id, "target_name": spec.name, "weight": weight, "prediction_id": row.id,
                **({"calibration_id": calibrations[spec.id].id} if calibrations else {})}
               for (_, spec, weight), row in zip(merged.values(), created.rows, strict=True)]
    population = Population(
        id=population_id, request_id=created.request_id, workload_digest=request.workload.digest(),
        workload=request.workload.canonical(), model=request.workload.model, estimator=created.rows[0].estimator,
        members=members, ks=list(request.k), slowest=request.slowest, weighting=request.weighting,
        measurements=[{"target": m.target, "measured_ms": m.measured_ms,
                       "workload": (m.workload or request.workload).canonical()} for m in request.measurements]
        or None,
        status="queued", created_by=caller.key_id if caller is not None else None,
    )
    session.add(population)
    session.commit()
    return population, refresh_population(session=session, population=population)


def get_population(*, session: Session, population_id: str, owner: str | None = None) -> Population | None:
    population = session.get(Population, population_id)
    if population is None or (owner is not None and population.created_by != owner):
        return None
    return population


def list_populations(*, session: Session, skip: int = 0, limit: int = 100,
                     owner: str | None = None) -> tuple[list[Population], int]:
    conditions = [Population.created_by == owner] if owner is not None else []
    count = session.scalar(select(func.count()).select_from(Population).where(*conditions)) or 0
    rows = session.scalars(select(Population).where(*conditions)
                           .order_by(Population.created_at.desc(), Population.id).offset(skip).limit(limit)).all()
    return list(rows), int(count)


def population_rows(*, session: Session, population: Population) -> dict[str, Prediction]:
    ids = [member["prediction_id"] for member in population.members]
    return {row.id: row for row in session.scalars(select(Prediction).where(Prediction.id.in_(ids)))}


def refresh_population(*, session: Session, population: Population) -> dict[str, Prediction]:
    """Bring the population's status up to its predictions'; summarise it once every one of them is final, and
    provisionally (status estimated) while every one that is not final carries an estimate."""
    rows = population_rows(session=session, population=population)
    if population.status in ("done", "failed"):
        return rows
    members = [rows.get(m["prediction_id"]) for m in population.members]
    states = [Status(row.status) if row is not None else Status.failed for row in members]
    if all(state.final for state in states):
        summary = summarize_population(population, rows)
        population.status = "done" if summary is not None else "failed"
        population.summary = summary.model_dump(mode="json") if summary is not None else None
        population.finished_at = utcnow()
        session.commit()
        return rows
    provisional = None
    if all(state.final or (row is not None and row.estimate is not None)
           for state, row in zip(states, members, strict=True)):
        provisional = summarize_population(population, rows)
    status_ = ("estimated" if provisional is not None
               else "queued" if all(state == Status.queued for state in states) else "running")
    summary_ = provisional.model_dump(mode="json") if provisional is not None else None
    if (status_, summary_) != (population.status, population.summary):
        population.status, population.summary = status_, summary_
        session.commit()
    return rows


def member_answer(row: Prediction | None) -> tuple[str, float | None, str | None]:
    """What a population counts for one device: (status, step time, why it has none), from its prediction's result
    once final, else from its estimate (whose status is done or oom)."""
    if row is None:
        return Status.failed.value, None, "the prediction row is gone"
    if Status(row.status).final or row.estimate is None:
        return row.status, row.latency_ms, row.error
    estimate = Estimate.model_validate(row.estimate)
    reason = None
    if estimate.status == Status.oom.value:
        reason = f"estimated without a GPU: {estimate.memory.describe() if estimate.memory else 'does not fit'}"
    return estimate.status, estimate.latency_ms, reason


def summarize_population(population: Population, rows: dict[str, Prediction]) -> PopulationSummary | None:
    """The summary over the devices whose prediction is done (or, for a provisional one, estimated to run); None
    when no device could run the workload."""
    ran: list[DeviceLatency] = []
    excluded: list[ExcludedDevice] = []
    total = sum(float(member["weight"]) for member in population.members)
    left_out = 0.0
    for member in population.members:
        status, latency_ms, reason = member_answer(rows.get(member["prediction_id"]))
        weight = float(member["weight"])
        if status == Status.done.value and latency_ms is not None:
            ran.append(DeviceLatency(target_id=member["target_id"], latency_ms=latency_ms, weight=weight,
                                     target_name=member.get("target_name")))
            continue
        left_out += weight
        excluded.append(ExcludedDevice(target_id=member["target_id"], target_name=member.get("target_name"),
                                       status=status, share=weight / total, reason=reason))
    if not ran:
        return None
    return summarize(ran, population.ks, slowest_n=population.slowest, excluded=excluded, excluded_weight=left_out)


# --- calibrations -----------------------------------------------------------------------------------------------


def default_base(*, session: Session, settings: Settings) -> str:
    """The base estimator a calibration corrects when none is named: hostaware with a GPU worker, else analytic."""
    return DEFAULT_GPU_ESTIMATOR if live_gpu_hosts(session=session, settings=settings) else DEFAULT_CPU_ESTIMATOR


def calibration_row(*, target_id: str, points: CalibrationSet, caller: Caller | None,
                    population_id: str | None = None) -> Calibration:
    """A calibration's row, added to no session: its points as the worker reads them back (ledger.calibrations)."""
    return Calibration(
        id=new_id(), target_id=target_id, base_estimator=points.base_estimator,
        points={"points": [{"workload": p.workload.canonical(), "measured_ms": p.measured_ms,
                            **({"measured_on": p.measured_on} if p.measured_on else {})} for p in points.points]},
        parameters={"digest": points.digest(), "k": len(points.points), "fits": {}},
        created_at=utcnow(), created_by=caller.key_id if caller is not None else None, population_id=population_id,
    )


def create_calibration(*, session: Session, settings: Settings, target: TargetSpec, request: CalibrationCreate,
                       caller: Caller | None) -> Calibration:
    """Store a target's measured points; the calibrated estimator fits them when it predicts (it needs the base's
    predictions of the points, which a worker makes)."""
    base = request.base_estimator or default_base(session=session, settings=settings)
    points = CalibrationSet(points=[point.point() for point in request.points], base_estimator=base)
    row = calibration_row(target_id=target.id, points=points, caller=caller)
    session.add(row)
    session.commit()
    return row


def measured_calibrations(*, session: Session, settings: Settings, request: PopulationCreate,
                          specs: list[TargetSpec], population_id: str,
                          caller: Caller | None) -> dict[str, Calibration]:
    """One calibration per device from the population's measurements: a device's own measurements are its points,
    every other GPU's are points measured there. The caller's earlier population calibration of the same points is
    used again (an FL orchestrator posts the same measurements every round): a cached prediction names the
    calibration it was made with, and its fits are kept. A new one is added to the session (committed with the
    predictions)."""
    base = request.estimator or default_base(session=session, settings=settings)
    measured = request.measured_points()
    calibrations = {}
    for spec in specs:
        points = CalibrationSet(base_estimator=base, points=[
            point if on == spec.id else point.model_copy(update={"measured_on": on}) for on, point in measured])
        row = population_calibration(session=session, target_id=spec.id, points=points, caller=caller)
        if row is None:
            row = calibration_row(target_id=spec.id, points=points, caller=caller, population_id=population_id)
            session.add(row)
        calibrations[spec.id] = row
    return calibrations


def population_calibration(*, session: Session, target_id: str, points: CalibrationSet,
                           caller: Caller | None) -> Calibration | None:
    """The first calibration of these points a population of the caller's made for the target, if any."""
    return session.scalars(select(Calibration).where(
        Calibration.target_id == target_id, Calibration.population_id.is_not(None),
        calibrations_of(caller.key_id if caller is not None else None),
        Calibration.base_estimator == points.base_estimator,
        Calibration.parameters["digest"].as_string() == points.digest(),
    ).order_by(Calibration.created_at, Calibration.id).limit(1)).first()


def calibrations_of(owner: str | None) -> Any:
    """Calibrations the key made (None: the service runs without keys, and its calibrations have no owner either)."""
    return Calibration.created_by == owner if owner is not None else Calibration.created_by.is_(None)


def list_calibrations(*, session: Session, target_id: str, owner: str | None = None) -> list[Calibration]:
    """A target's calibrations, latest first: the owner's (None: everyone's), not the ones populations made."""
    conditions = [Calibration.created_by == owner] if owner is not None else []
    return list(session.scalars(select(Calibration).where(Calibration.target_id == target_id,
                                                          Calibration.population_id.is_(None), *conditions)
                                .order_by(Calibration.created_at.desc(), Calibration.id)))


def latest_calibrations(*, session: Session, target_ids: list[str], owner: str | None) -> dict[str, Calibration]:
    """The owner's latest calibration of each target it calibrated (owner None: the service runs without keys, and
    its calibrations have no owner either); a population's calibrations are its own and never count."""
    latest: dict[str, Calibration] = {}
    for row in session.scalars(select(Calibration).where(Calibration.target_id.in_(set(target_ids)),
                                                         calibrations_of(owner),
                                                         Calibration.population_id.is_(None))
                               .order_by(Calibration.created_at.desc(), Calibration.id)):
        latest.setdefault(row.target_id, row)
    return latest
