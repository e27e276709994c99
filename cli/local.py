"""One-shot predictions in-process with a store cache: what `understudy predict` runs, no server needed.

The store is looked up before anything heavy is imported. A cache key needs only the host's identity, which
engine.probe remembers from the last probe, so an answer that is all in the cache costs no torch import (under a
second, process start included: benchmarks/cli/), and a SQLite cache is read without SQLAlchemy. A miss builds the
engine (torch, a fresh host probe) and measures the missing targets together.

Measuring takes seconds on the GPU, so before it the command can show estimates (estimate_first): the analytic
roofline's answer for each target the store lacks, which needs no GPU, cached as any other prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec
from understudy.errors import UnderstudyError
from understudy.estimator_info import ESTIMATE_ESTIMATOR
from understudy.keys import cache_key, expected_identity
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


def measures_on_gpu(engine: Engine, estimator_name: str | None, targets: list[TargetSpec],
                    calibrations: Mapping[str, CalibrationSet] | None = None) -> bool:
    """Whether predicting these targets times the workload on this machine's GPU: the estimator's own need, or the
    calibrated estimator's base's, for each target it has a calibration of (one without fails, measuring nothing)."""
    from engine.estimators.calibrated import CalibratedEstimator

    estimator = engine.estimator(estimator_name)
    if not isinstance(estimator, CalibratedEstimator):
        return estimator.needs_gpu
    given = calibrations or {}
    for target in targets:
        if target.id in given:
            try:
                if estimator.base(engine, given[target.id]).needs_gpu:
                    return True
            except UnderstudyError:  # a base this machine cannot run: that target's result will say so
                continue
    return False


def estimate_first(engine: Engine, db: DbEngine, workload: Workload, targets: list[TargetSpec],
                   estimator_name: str | None = None, progress: Progress | None = None,
                   calibrations: Mapping[str, CalibrationSet] | None = None) -> list[Answer] | None:
    """What to show while the estimator measures: each target's stored answer, else its ESTIMATE_ESTIMATOR answer
    (stored too, so a repeat has it at once). None when nothing would be measured: every answer is stored, or the
    estimator does not time the workload on the GPU (its answer comes as fast as an estimate would)."""
    name = engine.estimator(estimator_name).name
    keys = [cache_key(workload, t, engine.identity(name, t, calibrations)) for t in targets]
    found = lookup(db, keys)
    missing = {k: t for t, k in zip(targets, keys, strict=True) if k not in found}
    if not missing or not measures_on_gpu(engine, name, list(missing.values()), calibrations):
        return None
    if progress:
        progress(f"estimating {workload.label} on {len(missing)} target(s) without the GPU")
    estimated = dict(zip(missing, predict_cached(engine, db, workload, list(missing.values()), ESTIMATE_ESTIMATOR),
                         strict=True))
    return [Answer(found[k], True) if k in found else Answer(*estimated[k], estimate=True) for k in keys]


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
    def remembers_host(self) -> bool:
        """Whether the host is known without probing it (and so without torch)."""
        return self._host is not None

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

    def cached(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
               calibrations: Mapping[str, CalibrationSet] | None = None) -> Rows | None:
        """Every target's answer from the store, without the engine; None unless all of them are there."""
        if self._host is None:
            return None
        keys = [cache_key(workload, target, expected_identity(estimator_name, target, self._host, self.settings,
                                                              calibrations))
                for target in targets]
        path = sqlite_path(self.database_url)
        found = lookup_sqlite(path, keys) if path is not None else lookup(self.store(), keys)
        if len(found) < len(set(keys)):
            return None
        return [(found[key], True) for key in keys]

    def estimates(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                  progress: Progress | None = None,
                  calibrations: Mapping[str, CalibrationSet] | None = None) -> list[Answer] | None:
        """estimate_first's answers to show before predict() measures; None, without the engine, when the store
        holds every answer."""
        if self.cached(workload, targets, estimator_name, calibrations) is not None:
            return None
        if progress and self._engine is None:
            progress("loading torch and timm")
        return estimate_first(self.engine(), self.store(), workload, targets, estimator_name, progress, calibrations)

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None,
                calibrations: Mapping[str, CalibrationSet] | None = None) -> Rows:
        """(result, served from cache) per target: from the store alone when it holds them all, else through the
        engine, which measures what is missing."""
        rows = self.cached(workload, targets, estimator_name, calibrations)
        if rows is not None:
            return rows
        if progress and self._engine is None:
            progress("loading torch and timm")
        engine = self.engine()
        if progress:
            progress(f"predicting {workload.label} on {len(targets)} target(s)")
        return predict_cached(engine, self.store(), workload, targets, estimator_name, progress, calibrations)
