"""One-shot predictions in-process with a store cache: what `understudy predict` runs, no server needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine as DbEngine

from understudy.calibration import CalibrationSet
from understudy.catalog import TargetSpec
from understudy.keys import cache_key
from understudy.results import PredictionResult, Status
from ledger.db import session_scope
from ledger.predictions import get_by_key, save_result, to_result
from understudy.workload import Workload
from engine.engine import Engine, Progress


def predict_cached(engine: Engine, db: DbEngine, workload: Workload, targets: list[TargetSpec],
                   estimator_name: str | None = None,
                   progress: Progress | None = None,
                   calibrations: Mapping[str, CalibrationSet] | None = None) -> list[tuple[PredictionResult, bool]]:
    """(result, served from cache) per target; misses are measured together and stored. `calibrations` (by target
    id) are for the calibrated estimator; its cache keys name each target's calibration."""
    name = engine.estimator(estimator_name).name
    identities = [engine.identity(name, t, calibrations) for t in targets]
    keys = [cache_key(workload, t, identity) for t, identity in zip(targets, identities, strict=True)]
    extra: dict[str, Any] = {"calibrations": calibrations} if calibrations is not None else {}
    found: dict[str, PredictionResult] = {}
    with session_scope(db) as session:
        for key in keys:
            row = get_by_key(session, key)
            if row is not None and Status(row.status).final and row.status != Status.failed:
                found[key] = to_result(row)
    missing = [t for t, k in zip(targets, keys, strict=True) if k not in found]
    fresh = dict(zip([k for k in keys if k not in found],
                     engine.predict(workload, missing, name, progress, **extra) if missing else [], strict=True))
    with session_scope(db) as session:
        for target, key, identity in zip(targets, keys, identities, strict=True):
            if key in fresh:
                save_result(session, cache_key=key, workload=workload, target=target, identity=identity,
                            result=fresh[key])
    return [(found[k], True) if k in found else (fresh[k], False) for k in keys]
