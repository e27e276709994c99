"""The worker process: one per GPU. `understudy worker --gpu N` runs `run_worker`.

It probes its host in a child process (so this process never touches CUDA), takes an exclusive Redis lock on its GPU,
undoes what a killed predecessor's jobs left on the GPU (a clock lock, MPS daemons), registers itself in the hosts
table, re-queues what Redis lost, then serves "cpu" and its host-class queue one job at a time. Every job runs in one
warm measuring process (worker.measuring), started with the worker and dying with it; a heartbeat thread keeps the
lock, the liveness key and the hosts row fresh and re-runs the reconciler now and then.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq.timeouts import BaseDeathPenalty
from rq.worker import SimpleWorker
from sqlalchemy import Engine as DbEngine
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ledger.dispatch import reconcile, worker_token
from ledger.jobs import SERIALIZER, AllowListedJob
from ledger.queues import CPU_QUEUE, ENV_WORKER_TOKEN, alive_key, gpu_lock_key, host_id, host_queue
from understudy.results import HostInfo
from understudy.settings import Settings
from ledger.db import get_engine
from ledger.models import Host
from engine.restrict import ENV_MPS_DIR, quit_mps_daemons, reset_clocks
from worker.measuring import MeasuringProcess
from worker.tasks import use_measuring_process

log = logging.getLogger("understudy.worker")


class WorkerError(RuntimeError):
    """The worker cannot start (GPU held by another worker, probe failed...)."""


# --- the host probe, in a child process -------------------------------------------------------------------------


def probe_child(gpu_index: int) -> None:
    """Entry point of the probe process: print the host and the estimator versions it would record, as JSON."""
    from engine.estimators import ESTIMATORS, get_estimator
    from engine.probe import cuda_problem, load_nvml, probe_host

    nvml = load_nvml()
    problem = cuda_problem(gpu_index, nvml)
    host = probe_host(gpu_index, nvml)
    # Only what this host can run: a worker without a GPU serves the estimators that need none.
    estimators = {}
    for name, cls in ESTIMATORS.items():
        if host.has_gpu or not cls.needs_gpu:
            estimators[name] = {"version": get_estimator(name).version, "needs_gpu": bool(cls.needs_gpu)}
    gpu_uuid = None
    if nvml is not None and host.has_gpu:
        raw = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(gpu_index))
        gpu_uuid = raw.decode() if isinstance(raw, bytes) else str(raw)
    result = {"host": host.model_dump(mode="json"), "estimators": estimators, "gpu_uuid": gpu_uuid,
              "cuda_problem": problem}
    sys.stdout.write("\n" + json.dumps(result) + "\n")


@dataclass(frozen=True)
class Probe:
    host: HostInfo
    estimators: dict[str, Any]
    gpu_uuid: str | None  # NVML's GPU-... id: one lock per physical GPU, whatever the machine calls itself
    cuda_problem: str | None = None  # why torch cannot use a GPU that NVML sees (engine.probe.cuda_problem)


def probe(gpu_index: int, timeout_s: float = 300.0) -> Probe:
    """The host as a fresh process sees it (CUDA initialised there, never here)."""
    code = "import sys; from worker.main import probe_child; probe_child(int(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(gpu_index)], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise WorkerError(f"the host probe failed:\n{done.stderr.strip()[-2000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return Probe(HostInfo.model_validate(data["host"]), data["estimators"], data.get("gpu_uuid"),
                 data.get("cuda_problem"))


def check_start(settings: Settings, gpu_index: int, probed: Probe) -> None:
    """Refuse to start a worker that could not do what its GPU is there for: torch unable to use the GPU (an old
    driver for its CUDA build), or MPS asked for without its control program."""
    if probed.cuda_problem:
        raise WorkerError(f"GPU {gpu_index} is there but torch cannot use it: {probed.cuda_problem}")
    if probed.host.has_gpu and settings.sm_mechanism == "mps" and shutil.which(settings.mps_control) is None:
        raise WorkerError(f"UNDERSTUDY_SM_MECHANISM=mps needs {settings.mps_control}, which is not on PATH: it comes "
                          "with the NVIDIA driver (in a container, with NVIDIA_DRIVER_CAPABILITIES=compute,utility, "
                          "as the worker image sets)")


# --- the GPU lock -----------------------------------------------------------------------------------------------

_REFRESH = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[2])
return 1
"""


class GpuLock:
    """An exclusive, expiring lock on one GPU slot; its value is the holder's token."""

    def __init__(self, redis: Redis, slot: str, token: str, ttl_s: float) -> None:
        self.redis, self.slot, self.token, self.ttl_ms = redis, slot, token, int(ttl_s * 1000)
        self.keys = [gpu_lock_key(slot), alive_key(token)]

    def acquire(self, wait_s: float | None = None, poll_s: float = 0.5) -> bool:
        """Take the lock; wait up to wait_s (None: forever) while another worker holds it."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        announced = False
        while True:
            if self.redis.set(self.keys[0], self.token, nx=True, px=self.ttl_ms):
                self.redis.set(self.keys[1], "1", px=self.ttl_ms)
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if not announced:
                holder = self.redis.get(self.keys[0])
                log.warning("GPU %s is held by worker %s; waiting for it to stop or its lock to expire", self.slot,
                            holder.decode() if isinstance(holder, bytes) else holder)
                announced = True
            time.sleep(poll_s)

    def refresh(self) -> bool:
        """Extend the lock (re-taking it if Redis lost it); False when another worker holds it now."""
        return bool(self.redis.eval(_REFRESH, 2, *self.keys, self.token, self.ttl_ms))

    def release(self) -> None:
        self.redis.eval(_RELEASE, 2, *self.keys, self.token)


# --- the rq worker ----------------------------------------------------------------------------------------------


class NoDeathPenalty(BaseDeathPenalty):
    """No alarm in the worker's own process: the measuring process enforces each job's limit (worker.measuring), and
    the worker waits for it no longer than that limit and a grace period."""

    def setup_death_penalty(self) -> None:
        pass

    def cancel_death_penalty(self) -> None:
        pass


class UnderstudyWorker(SimpleWorker):
    """rq's SimpleWorker: it takes the jobs and records their outcomes itself, and worker.tasks.run_predictions
    hands each job's rows to the worker's warm measuring process, so this process never touches a GPU."""

    death_penalty_class = NoDeathPenalty

    def subscribe(self) -> None:
        """rq's subscription to its command channel, its listening thread waking every second instead of every
        minute: at shutdown rq unsubscribes and stops that thread, and redis-py (from 8.x) waits for the thread,
        which sits out its whole wait once unsubscribed, so a warm shutdown took up to a minute."""
        self.log.info("Worker %s: subscribing to channel %s", self.name, self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(sleep_time=1, daemon=True,
                                                       exception_handler=self._pubsub_exception_handler)


# --- heartbeat --------------------------------------------------------------------------------------------------


def register_host(db: DbEngine, slot: str, host: HostInfo, info: dict[str, Any]) -> None:
    """Upsert this worker's row in the hosts table (the API picks GPU hosts from it). The heartbeat is the
    database's clock, so that machines with skewed clocks still compare fairly."""
    values = {"id": slot, "host_class": host_queue(host.has_gpu, host.fingerprint), "gpu_name": host.gpu_name,
              "fingerprint": host.fingerprint,
              "info": info, "last_heartbeat": func.now()}
    statement = insert(Host).values(**values)
    statement = statement.on_conflict_do_update(index_elements=[Host.id], set_={
        key: statement.excluded[key] for key in values if key != "id"})
    with Session(db) as session:
        session.execute(statement)
        session.commit()


@dataclass
class Heartbeat:
    """A thread that refreshes the lock and the hosts row every heartbeat_s and reconciles every interval."""

    settings: Settings
    db: DbEngine
    redis: Redis
    lock: GpuLock
    slot: str
    register: Any  # () -> None: upsert the hosts row
    on_lost_lock: Any
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="understudy-heartbeat", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        last_reconcile = time.monotonic()
        while not self.stop.wait(self.settings.heartbeat_s):
            try:
                if not self.lock.refresh():
                    log.error("another worker took GPU %s; stopping after the current job", self.slot)
                    self.on_lost_lock()
                    return
            except RedisError as exc:
                log.warning("heartbeat: Redis unreachable (%s)", exc)
            try:
                self.register()
            except SQLAlchemyError as exc:
                log.warning("heartbeat: database unreachable (%s)", exc)
            interval = self.settings.reconcile_interval_s
            if interval and time.monotonic() - last_reconcile >= interval:
                last_reconcile = time.monotonic()
                try:
                    reconcile(self.db, self.redis, self.settings)
                except (RedisError, SQLAlchemyError) as exc:
                    log.warning("reconciler: %s", exc)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)


# --- what a killed worker left on its GPU -------------------------------------------------------------------------


def mps_dir(settings: Settings, gpu_index: int) -> Path:
    """Where the jobs of GPU `gpu_index`'s worker start their MPS daemons, one folder each (engine.restrict)."""
    return Path(settings.run_dir) / f"gpu{gpu_index}" / "mps"


def release_leftovers(settings: Settings, gpu_index: int, has_gpu: bool) -> list[str]:
    """Undo what the jobs of a worker killed on this GPU left behind: reset a core clock lock (where clock locks are
    allowed) and quit the MPS daemons they started, removing their folders. Says what it did.

    Only for a worker that holds the GPU's lock: a live worker's restrictions are never touched. NVML only, no CUDA.
    """
    released = []
    if has_gpu and settings.allow_clock_lock:
        from engine.probe import load_nvml

        nvml = load_nvml()
        if nvml is not None:
            try:
                reset_clocks(nvml, nvml.nvmlDeviceGetHandleByIndex(gpu_index))
                released.append("core clock lock reset")
            except Exception as exc:  # noqa: BLE001 - pynvml's NVMLError: say so, start anyway (jobs reset again)
                log.warning("could not reset GPU %d's clock lock: %s", gpu_index, exc)
    folders = quit_mps_daemons(mps_dir(settings, gpu_index), settings.mps_control)
    released.extend(f"MPS daemon quit ({root})" for root in folders)
    return released


# --- the process ------------------------------------------------------------------------------------------------


def run_worker(settings: Settings, gpu_index: int, *, burst: bool = False, wait_s: float | None = None) -> int:
    """Serve jobs for GPU `gpu_index` until stopped (or, with burst, until the queues are empty). Returns an exit
    code."""
    redis = Redis.from_url(settings.redis_url)
    db = get_engine(settings.database_url)
    probed = probe(gpu_index)
    check_start(settings, gpu_index, probed)
    host = probed.host
    hclass = host_queue(host.has_gpu, host.fingerprint)
    # "cpu" first: its jobs (GPU-free estimates, analytic answers) take well under a second, so a user waiting for
    # an estimate never waits behind a queue of measurements.
    queues = [CPU_QUEUE, hclass] if hclass != CPU_QUEUE else [CPU_QUEUE]
    if not host.has_gpu:
        log.warning("%s: serving only estimators that need no GPU (queue %r)", host.note or "no GPU", CPU_QUEUE)
    slot = host_id(settings.host_name, gpu_index)
    token = worker_token(slot, os.getpid(), uuid.uuid4().hex[:6])
    lock = GpuLock(redis, probed.gpu_uuid or slot, token, settings.lock_ttl_s)
    if not lock.acquire(wait_s):
        raise WorkerError(f"GPU {probed.gpu_uuid or slot} ({slot}) is held by another worker")
    heartbeat: Heartbeat | None = None
    measuring: MeasuringProcess | None = None
    try:
        # Now that the GPU is ours, nothing a previous worker's jobs left on it is still in use.
        for what in release_leftovers(settings, gpu_index, host.has_gpu):
            log.warning("GPU %d: %s, left by a worker that did not stop cleanly", gpu_index, what)
        # The measuring process reads these: which GPU, which worker claims rows, where MPS daemons go.
        os.environ.update({"UNDERSTUDY_WORKER_GPU": str(gpu_index), ENV_WORKER_TOKEN: token,
                           ENV_MPS_DIR: str(mps_dir(settings, gpu_index))})
        measuring = MeasuringProcess(on_killed=lambda: _released_after_kill(settings, gpu_index, host.has_gpu))
        measuring.start()  # it warms up (torch, the engine, CUDA) while the worker registers
        use_measuring_process(measuring)
        worker = UnderstudyWorker(queues, connection=redis, name=token, serializer=SERIALIZER,
                                  job_class=AllowListedJob)
        info = {**host.model_dump(mode="json"), "estimators": probed.estimators, "host_name": settings.host_name,
                "gpu_index": gpu_index, "gpu_uuid": probed.gpu_uuid, "lock": lock.keys[0], "lock_token": token,
                "queues": queues, "pid": os.getpid()}
        # On a lost lock: rq's warm shutdown (finish the current job, then stop), a signal handler of the main thread.
        heartbeat = Heartbeat(settings, db, redis, lock, slot, register=lambda: register_host(db, slot, host, info),
                              on_lost_lock=lambda: os.kill(os.getpid(), signal.SIGTERM))
        register_host(db, slot, host, info)
        report = reconcile(db, redis, settings)
        log.info("worker %s serving %s (reconciler re-queued %d row(s))", token, queues, len(report.requeued))
        heartbeat.start()
        worker.work(burst=burst, with_scheduler=False, logging_level=logging.getLevelName(log.getEffectiveLevel()))
        return 0
    finally:
        if measuring is not None:
            use_measuring_process(None)
            measuring.stop()
        if heartbeat is not None:
            heartbeat.close()
        try:
            lock.release()
        except RedisError:
            pass


def _released_after_kill(settings: Settings, gpu_index: int, has_gpu: bool) -> None:
    """After a measuring process that overran its job was killed: release what it held on the GPU."""
    for what in release_leftovers(settings, gpu_index, has_gpu):
        log.warning("GPU %d: %s, left by a measuring process that had to be killed", gpu_index, what)


def healthcheck(settings: Settings, gpu_index: int) -> tuple[bool, str]:
    """Whether a worker for this slot runs on this machine: its hosts row is fresh and it holds its lock."""
    slot = host_id(settings.host_name, gpu_index)
    with Session(get_engine(settings.database_url)) as session:
        row = session.get(Host, slot)
        if row is None:
            return False, f"no worker registered as {slot}"
        age = (session.execute(select(func.now())).scalar_one() - row.last_heartbeat).total_seconds()
        info = dict(row.info or {})
    if age > settings.lock_ttl_s:
        return False, f"{slot}: last heartbeat {age:.0f} s ago"
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=2)
    holder = redis.get(info.get("lock") or gpu_lock_key(slot))
    if holder is None or (holder.decode() if isinstance(holder, bytes) else holder) != info.get("lock_token"):
        return False, f"{slot}: the worker does not hold its GPU lock"
    return True, f"{slot}: ok (heartbeat {age:.0f} s ago)"
