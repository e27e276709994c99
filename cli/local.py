"""One-shot predictions in-process with a store cache: what `understudy predict` runs, no server needed.

The store is looked up before anything heavy is imported. A cache key needs only the host's identity, which
engine.probe remembers from the last probe, so an answer that is all in the cache costs no torch import (under a
second, process start included: benchmarks/cli/), and a SQLite cache is read without SQLAlchemy. A miss builds the
engine (torch, a fresh host probe) and measures the missing targets together.

Measuring takes seconds on the GPU, so before it the command can show estimates (LocalPredictor.estimates): the
analytic roofline's answer for each target the store lacks, which needs no GPU, cached as any other prediction. They
are counted before the host is probed, as probing initialises CUDA.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec
from understudy.errors import UnderstudyError
from understudy.estimator_info import CALIBRATED_ESTIMATOR, ESTIMATE_ESTIMATOR
from understudy.keys import ANY_HOST, cache_key, expected_identity
from understudy.results import HostInfo, PredictionResult, Status
from understudy.settings import Settings
from ledger.sqlite_cache import lookup_sqlite, sqlite_path
from understudy.workload import Workload
from engine import probe

if TYPE_CHECKING:
    from sqlalchemy import Engine as DbEngine

    from engine.engine import Engine, Progress

Rows = list[tuple[PredictionResult, bool]]


class Answer(NamedTuple):
    """One target's answer as the command shows it: whether the store served it, and whether it is an estimate
    standing in for a measurement not yet made."""

    result: PredictionResult
    cached: bool
    estimate: bool = False


def lookup(db: DbEngine, keys: list[str]) -> dict[str, PredictionResult]:
    """The final, usable results stored under these keys (a failed one is asked again)."""
    from ledger.db import session_scope
    from ledger.predictions import get_by_key, to_result

    found: dict[str, PredictionResult] = {}
    with session_scope(db) as session:
        for key in keys:
            row = get_by_key(session, key)
            if row is not None and Status(row.status).final and row.status != Status.failed:
                found[key] = to_result(row)
    return found


def predict_cached(engine: Engine, db: DbEngine, workload: Workload, targets: list[TargetSpec],
                   estimator_name: str | None = None,
                   progress: Progress | None = None,
                   calibrations: Mapping[str, CalibrationSet] | None = None) -> Rows:
    """(result, served from cache) per target; misses are measured together and stored. `calibrations` (by target
    id) are for the calibrated estimator; its cache keys name each target's calibration."""
    from ledger.db import session_scope
    from ledger.predictions import save_result

    name = engine.estimator(estimator_name).name
    identities = [engine.identity(name, t, calibrations) for t in targets]
    keys = [cache_key(workload, t, identity) for t, identity in zip(targets, identities, strict=True)]
    extra: dict[str, Any] = {"calibrations": calibrations} if calibrations is not None else {}
    found = lookup(db, keys)
    missing = [t for t, k in zip(targets, keys, strict=True) if k not in found]
    fresh = dict(zip([k for k in keys if k not in found],
                     engine.predict(workload, missing, name, progress, **extra) if missing else [], strict=True))
    with session_scope(db) as session:
        for target, key, identity in zip(targets, keys, identities, strict=True):
            if key in fresh:
                save_result(session, cache_key=key, workload=workload, target=target, identity=identity,
                            result=fresh[key])
    return [(found[k], True) if k in found else (fresh[k], False) for k in keys]


class LocalPredictor:
    """`understudy predict` on this machine's GPU `gpu_index` (or without one), cache first: a SQLite cache is read
    with sqlite3 alone (ledger.sqlite_cache), and SQLAlchemy, torch and the engine come in only for what
    the cache does not hold."""

    def __init__(self, settings: Settings, database_url: str, gpu_index: int = 0) -> None:
        self.settings = settings
        self.database_url = database_url
        self.gpu_index = gpu_index
        self.nvml = probe.load_nvml()
        self.probe_file = Path(settings.cache_dir) / "hosts" / f"gpu{gpu_index}.json"
        self._host = probe.remembered_host(self.probe_file, gpu_index, self.nvml)
        self._engine: Engine | None = None

    @property
    def host(self) -> HostInfo:
        """The host: as remembered, else probed now (which builds the engine, and so imports torch)."""
        return self._host if self._host is not None else self.engine().host

    @property
    def seen_host(self) -> HostInfo:
        """The host as far as it is known without torch: as probed or remembered, else NVML's view of the GPU (its
        name, or why there is none), which is what tells the estimators that can run here apart."""
        return self._host if self._host is not None else probe.nvml_view(self.gpu_index, self.nvml)

    def engine(self) -> Engine:
        if self._engine is None:
            from engine.engine import Engine

            self._engine = Engine(self.settings, gpu_index=self.gpu_index, nvml=self.nvml)
            self._host = self._engine.host
            probe.remember_host(self.probe_file, self.gpu_index, self.nvml, self._host)
        return self._engine

    def store(self) -> DbEngine:
        """The cache database through SQLAlchemy (a SQLite file is created with its tables on first use)."""
        from ledger.db import init_sqlite

        return init_sqlite(self.database_url)

    def stored(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
               calibrations: Mapping[str, CalibrationSet] | None = None) -> dict[str, PredictionResult]:
        """The final answers the store holds for these targets, by target id, found without the engine; none before
        the host is probed or remembered (a measured answer's key names the host)."""
        if self._host is None:
            return {}
        keys = {target.id: cache_key(workload, target, expected_identity(estimator_name, target, self._host,
                                                                          self.settings, calibrations))
                for target in targets}
        path = sqlite_path(self.database_url)
        wanted = list(keys.values())
        found = lookup_sqlite(path, wanted) if path is not None else lookup(self.store(), wanted)
        return {target_id: found[key] for target_id, key in keys.items() if key in found}

    def cached(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
               calibrations: Mapping[str, CalibrationSet] | None = None) -> Rows | None:
        """Every target's answer from the store, without the engine; None unless all of them are there."""
        stored = self.stored(workload, targets, estimator_name, calibrations)
        if any(target.id not in stored for target in targets):
            return None
        return [(stored[target.id], True) for target in targets]

    def estimates(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                  progress: Progress | None = None,
                  calibrations: Mapping[str, CalibrationSet] | None = None) -> list[Answer] | None:
        """What to show while predict() measures: each target's stored answer, else its ESTIMATE_ESTIMATOR answer
        (stored too, so a repeat has it at once). None when nothing would be measured: every answer is stored, or
        no target's answer times the workload on the GPU (it comes as fast as an estimate would).

        The estimates come before the host is probed: probing initialises CUDA, a second or more, and an estimate
        needs no GPU. So they are made by an engine that knows no GPU, and which targets would be measured is told
        from the estimator table and NVML (understudy.keys.expected_identity, engine.probe.nvml_view)."""
        host, measured = self.seen_host, []
        for target in targets:
            try:
                identity = expected_identity(estimator_name, target, host, self.settings, calibrations)
            except UnderstudyError:
                if estimator_name != CALIBRATED_ESTIMATOR:
                    raise
                continue  # a calibration whose base cannot run here: predict() says so for that target
            measured.append(identity.host_key != ANY_HOST)
        if not any(measured):
            return None
        stored = self.stored(workload, targets, estimator_name, calibrations)
        missing = [target for target in targets if target.id not in stored]
        if not missing:
            return None
        if progress:
            progress(f"estimating {workload.label} on {len(missing)} target(s) without the GPU")
        from engine.engine import Engine

        counting = Engine(self.settings, gpu_index=self.gpu_index, nvml=self.nvml, host=HostInfo())
        estimated = dict(zip([target.id for target in missing],
                             predict_cached(counting, self.store(), workload, missing, ESTIMATE_ESTIMATOR),
                             strict=True))
        return [Answer(stored[t.id], True) if t.id in stored else Answer(*estimated[t.id], estimate=True)
                for t in targets]

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None,
                calibrations: Mapping[str, CalibrationSet] | None = None) -> Rows:
        """(result, served from cache) per target: from the store alone when it holds them all, else through the
        engine, which measures what is missing."""
        rows = self.cached(workload, targets, estimator_name, calibrations)
        if rows is not None:
            return rows
        if progress and self._engine is None:
            progress("loading torch and probing this machine's GPU")
        engine = self.engine()
        if progress:
            progress(f"predicting {workload.label} on {len(targets)} target(s)")
        return predict_cached(engine, self.store(), workload, targets, estimator_name, progress, calibrations)
