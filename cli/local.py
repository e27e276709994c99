"""One-shot predictions in-process with a store cache: what `understudy predict` runs, no server needed.

The store is looked up before anything heavy is imported. A cache key needs only the host's identity, which
engine.probe remembers from the last probe, so an answer that is all in the cache costs no torch import (under a
second, process start included: benchmarks/cli/), and a SQLite cache is read without SQLAlchemy. A miss builds the
engine (torch, a fresh host probe) and measures the missing targets together.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec
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
