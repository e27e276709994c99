"""Reading and writing the ledger for the API. Keyword-only functions; no HTTP here, no GPU code anywhere.

A POST turns into rows with INSERT ... ON CONFLICT (cache_key) DO NOTHING: whichever of two identical requests
inserts first queues the job, the other finds the row. Rows are committed before their job is enqueued.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from redis import Redis
from rq import Queue
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.errors import Conflict, FieldError
from app.schemas import CalibrationCreate, PopulationCreate, PredictionCreate
from understudy.calibration import CalibrationSet
from understudy.catalog import InlineTarget, TargetSpec, resolve_target
from ledger.dispatch import enqueue, new_job_id
from understudy.estimator_info import (CALIBRATED_ESTIMATOR, DEFAULT_CPU_ESTIMATOR, DEFAULT_GPU_ESTIMATOR,
                                       estimator_info, estimator_version)
from understudy.keys import CacheIdentity, cache_identity, cache_key
from understudy.populations import DeviceLatency, ExcludedDevice, PopulationSummary, summarize
from ledger.queues import CPU_QUEUE, GPU_QUEUE_PREFIX, is_gpu_queue
from understudy.results import Status
from understudy.settings import Settings
from ledger.models import ApiKey, Calibration, Host, Population, Prediction, new_id, utcnow
from ledger.calibrations import calibration_digest
from ledger.predictions import insert_queued, new_row, requeue_failed
from understudy.workload import Workload

CACHED_STATES = (Status.done.value, Status.oom.value)


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
    return {name: Queue(name, connection=redis).count for name in names}


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


def place(*, session: Session, redis: Redis, settings: Settings, request: PredictionCreate, workload: Workload,
          specs: list[TargetSpec]) -> Placement:
    """The estimator, its version and the host class: CPU estimators go to "cpu"; GPU ones to a registered GPU host."""
    explicit = None
    if request.host is not None:
        explicit = find_host(session=session, ref=request.host)
        if explicit is None:
            raise Conflict(f"no worker has registered host {request.host!r}; GET /v1/hosts lists the hosts")
    live = live_gpu_hosts(session=session, settings=settings)
    name = request.estimator
    if name is None:
        has_gpu = (explicit is not None and is_gpu_queue(explicit.host_class)) or (explicit is None and bool(live))
        name = DEFAULT_GPU_ESTIMATOR if has_gpu else DEFAULT_CPU_ESTIMATOR
    info = estimator_info(name)
    if not info.needs_gpu:
        # The same answer on every host: any worker may compute it, and the cache key names no host.
        return Placement(cache_identity(name, estimator_version(name, settings), None), CPU_QUEUE, None)
    if explicit is not None:
        if not is_gpu_queue(explicit.host_class):
            raise Conflict(f"host {explicit.id} has no GPU; estimator {name!r} times the workload on one")
        return _on_host(explicit, name, settings)
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
                     workload: Workload, specs: list[TargetSpec]) -> tuple[Placement, list[CacheIdentity]]:
    """The calibrated estimator goes where its base goes; each target's identity names its latest calibration."""
    found = latest_calibrations(session=session, target_ids=[spec.id for spec in specs])
    missing = list({spec.id: spec for spec in specs if spec.id not in found}.values())
    if missing:
        named = ", ".join(f"{spec.name} ({spec.id})" for spec in missing)
        raise Conflict(f"estimator 'calibrated' needs a calibration of each target and {named} has none: POST a few "
                       f"measured step times to /v1/targets/{missing[0].id}/calibrations first (catalog targets "
                       "only), or ask for another estimator")
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
    return placement, identities


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


def create_predictions(*, session: Session, redis: Redis, settings: Settings,
                       request: PredictionCreate) -> Created:
    """Serve cached results, insert the missing rows (exactly once, whatever runs concurrently), queue one job."""
    workload = request.workload
    specs = resolve_targets(list(request.targets), settings)
    if request.estimator == CALIBRATED_ESTIMATOR:
        placement, identities = place_calibrated(session=session, redis=redis, settings=settings, request=request,
                                                 workload=workload, specs=specs)
    else:
        placement = place(session=session, redis=redis, settings=settings, request=request, workload=workload,
                          specs=specs)
        identities = [placement.identity] * len(specs)
    keys = [cache_key(workload, spec, identity) for spec, identity in zip(specs, identities, strict=True)]
    identity_of = dict(zip(keys, identities, strict=True))
    request_id = uuid.uuid4().hex

    before = {row.cache_key: row for row in session.scalars(select(Prediction).where(Prediction.cache_key.in_(keys)))}
    cached = [key in before and before[key].status in CACHED_STATES for key in keys]
    if all(cached):
        return Created(request_id, [before[key] for key in keys], cached, None)
    redis.ping()  # answer 503 before writing anything when the queue is down

    now = utcnow()
    job_id = new_job_id()
    unique: dict[str, TargetSpec] = {}
    for key, spec in zip(keys, specs, strict=True):
        unique.setdefault(key, spec)
    fresh = [new_row(cache_key=key, workload=workload, target=unique[key], estimator=identity_of[key].estimator,
                     version=identity_of[key].version, host_class=placement.host_class, request_id=request_id)
             for key in sorted(unique) if key not in before]  # one lock order for every request: no deadlock
    ours = insert_queued(session, fresh, job_id=job_id, now=now)
    # A failed result is not cached: asking again runs it again (once, however many ask at the same moment).
    retry = sorted(key for key in unique if key in before and before[key].status == Status.failed.value)
    ours += requeue_failed(session, retry, job_id=job_id, request_id=request_id, now=now)
    session.commit()

    rows = {row.cache_key: row for row in session.scalars(
        select(Prediction).where(Prediction.cache_key.in_(keys)).execution_options(populate_existing=True))}
    queued_job = None
    if ours:
        mine = set(ours)
        ordered = [rows[key].id for key in dict.fromkeys(keys) if rows[key].id in mine]
        # Should this fail, the rows wait in the ledger and the reconciler queues them once Redis is back.
        enqueue(redis, settings, queue=placement.host_class, prediction_ids=ordered, job_id=job_id)
        queued_job = job_id
    return Created(request_id, [rows[key] for key in keys], cached, queued_job)


def get_prediction(*, session: Session, prediction_id: str) -> Prediction | None:
    return session.get(Prediction, prediction_id)


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

    def conditions(self) -> list[Any]:
        out: list[Any] = []
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
            out.append(Prediction.status == self.status.value)
        if self.since:
            out.append(Prediction.created_at >= self.since)
        if self.until:
            out.append(Prediction.created_at < self.until)
        return out


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
                      key: ApiKey | None) -> tuple[Population, dict[str, Prediction]]:
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
    created = create_predictions(session=session, redis=redis, settings=settings, request=PredictionCreate(
        workload=request.workload, targets=[item for item, _, _ in merged.values()], estimator=request.estimator,
        host=request.host))
    members = [{"target_id": spec.id, "target_name": spec.name, "weight": weight, "prediction_id": row.id}
               for (_, spec, weight), row in zip(merged.values(), created.rows, strict=True)]
    population = Population(
        request_id=created.request_id, workload_digest=request.workload.digest(),
        workload=request.workload.canonical(), model=request.workload.model, estimator=created.rows[0].estimator,
        members=members, ks=list(request.k), slowest=request.slowest, weighting=request.weighting,
        status="queued", created_by=key.id if key is not None else None,
    )
    session.add(population)
    session.commit()
    return population, refresh_population(session=session, population=population)


def get_population(*, session: Session, population_id: str) -> Population | None:
    return session.get(Population, population_id)


def list_populations(*, session: Session, skip: int = 0, limit: int = 100) -> tuple[list[Population], int]:
    count = session.scalar(select(func.count()).select_from(Population)) or 0
    rows = session.scalars(
        select(Population).order_by(Population.created_at.desc(), Population.id).offset(skip).limit(limit)).all()
    return list(rows), int(count)


def population_rows(*, session: Session, population: Population) -> dict[str, Prediction]:
    ids = [member["prediction_id"] for member in population.members]
    return {row.id: row for row in session.scalars(select(Prediction).where(Prediction.id.in_(ids)))}


def refresh_population(*, session: Session, population: Population) -> dict[str, Prediction]:
    """Bring the population's status up to its predictions'; summarise it once every one of them is final."""
    rows = population_rows(session=session, population=population)
    if population.status in ("done", "failed"):
        return rows
    states = [Status(rows[m["prediction_id"]].status) if m["prediction_id"] in rows else Status.failed
              for m in population.members]
    if all(state.final for state in states):
        summary = summarize_population(population, rows)
        population.status = "done" if summary is not None else "failed"
        population.summary = summary.model_dump(mode="json") if summary is not None else None
        population.finished_at = utcnow()
        session.commit()
        return rows
    status_ = "queued" if all(state == Status.queued for state in states) else "running"
    if status_ != population.status:
        population.status = status_
        session.commit()
    return rows


def summarize_population(population: Population, rows: dict[str, Prediction]) -> PopulationSummary | None:
    """The summary over the devices whose prediction is done; None when no device could run the workload."""
    ran: list[DeviceLatency] = []
    excluded: list[ExcludedDevice] = []
    total = sum(float(member["weight"]) for member in population.members)
    left_out = 0.0
    for member in population.members:
        row = rows.get(member["prediction_id"])
        weight = float(member["weight"])
        if row is not None and row.status == Status.done.value and row.latency_ms is not None:
            ran.append(DeviceLatency(target_id=member["target_id"], latency_ms=row.latency_ms, weight=weight,
                                     target_name=member.get("target_name")))
            continue
        left_out += weight
        excluded.append(ExcludedDevice(
            target_id=member["target_id"], target_name=member.get("target_name"),
            status=row.status if row is not None else Status.failed.value, share=weight / total,
            reason=row.error if row is not None else "the prediction row is gone"))
    if not ran:
        return None
    return summarize(ran, population.ks, slowest_n=population.slowest, excluded=excluded, excluded_weight=left_out)


# --- calibrations -----------------------------------------------------------------------------------------------


def create_calibration(*, session: Session, settings: Settings, target: TargetSpec, request: CalibrationCreate,
                       key: ApiKey | None) -> Calibration:
    """Store a target's measured points; the calibrated estimator fits them when it predicts (it needs the base's
    predictions of the points, which a worker makes)."""
    base = request.base_estimator
    if base is None:
        base = DEFAULT_GPU_ESTIMATOR if live_gpu_hosts(session=session, settings=settings) else DEFAULT_CPU_ESTIMATOR
    points = CalibrationSet(points=request.points, base_estimator=base)
    row = Calibration(
        id=new_id(), target_id=target.id, base_estimator=base,
        points={"points": [{"workload": p.workload.canonical(), "measured_ms": p.measured_ms} for p in points.points]},
        parameters={"digest": points.digest(), "k": len(points.points), "fits": {}},
        created_at=utcnow(), created_by=key.id if key is not None else None,
    )
    session.add(row)
    session.commit()
    return row


def list_calibrations(*, session: Session, target_id: str) -> list[Calibration]:
    return list(session.scalars(select(Calibration).where(Calibration.target_id == target_id)
                                .order_by(Calibration.created_at.desc(), Calibration.id)))


def latest_calibrations(*, session: Session, target_ids: list[str]) -> dict[str, Calibration]:
    """The latest calibration of each target that has one."""
    latest: dict[str, Calibration] = {}
    for row in session.scalars(select(Calibration).where(Calibration.target_id.in_(set(target_ids)))
                               .order_by(Calibration.created_at.desc(), Calibration.id)):
        latest.setdefault(row.target_id, row)
    return latest
