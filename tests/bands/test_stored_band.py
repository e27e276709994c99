"""A prediction's band and memory verdict survive the ledger: stored inside the details column
(PredictionResult.stored_details) and lifted out again when a row is read (PredictionResult.from_columns), through
SQLAlchemy and through the CLI's sqlite3-only cache lookup (ledger.sqlite_cache)."""

from __future__ import annotations

import json
from pathlib import Path

from understudy.catalog import catalog
from understudy.keys import ANY_HOST, CacheIdentity
from understudy.results import RESULT_ROW_COLUMNS, MemoryVerdict, PredictionResult, Status
from understudy.workload import Workload
from ledger.db import init_sqlite, session_scope
from ledger.predictions import get_by_key, save_result, to_result
from ledger.sqlite_cache import lookup_sqlite

from .conftest import known_band

WORKLOAD = Workload(model="resnet18", mode="infer", batch_size=8)
T4 = catalog().get("t4")
MEMORY = MemoryVerdict(verdict="tight", peak_gb=15.0, low_gb=12.0, high_gb=18.0, capacity_gb=16.0,
                       parts_gb={"weights": 1.0, "optimizer": 0.0, "activations": 13.0, "overhead": 1.0})
RESULT = PredictionResult(workload_digest=WORKLOAD.digest(), target_id="t4", estimator="analytic",
                          estimator_version="1", status=Status.done, latency_ms=12.0, samples_per_s=666.7,
                          host_fingerprint=ANY_HOST, details={"class_shares": {"other": 0.4}},
                          band=known_band(center=0.02, scale=0.1).narrowed(0.9, "calibrated on 5 point(s)"),
                          memory=MEMORY)
IDENTITY = CacheIdentity(estimator="analytic", version="1", host_key=ANY_HOST)


def as_columns(result: PredictionResult) -> dict[str, object]:
    """A ledger row's result columns as a JSON column hands them back."""
    values: dict[str, object] = {name: None for name in RESULT_ROW_COLUMNS}
    values.update(workload_digest=result.workload_digest, target_id=result.target_id, estimator=result.estimator,
                  estimator_version=result.estimator_version, status=result.status.value,
                  latency_ms=result.latency_ms, samples_per_s=result.samples_per_s, host_class=ANY_HOST,
                  host_fingerprint=result.host_fingerprint, details=json.loads(json.dumps(result.stored_details())))
    return values


def stored_in_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "cache.sqlite"
    with session_scope(init_sqlite(f"sqlite:///{path}")) as session:
        save_result(session, cache_key="k", workload=WORKLOAD, target=T4, identity=IDENTITY, result=RESULT)
    return path


def test_the_details_column_holds_the_band_and_the_memory_verdict_beside_the_details() -> None:
    stored = RESULT.stored_details()
    assert stored["class_shares"] == {"other": 0.4}
    assert stored["band"]["scale"] == RESULT.band.scale and stored["memory"]["verdict"] == "tight"  # type: ignore[union-attr]


def test_a_row_read_back_has_the_same_band_memory_and_details() -> None:
    read = PredictionResult.from_columns(as_columns(RESULT))
    assert (read.band, read.memory, read.details) == (RESULT.band, RESULT.memory, RESULT.details)
    assert read.interval_ms(0.9) == RESULT.interval_ms(0.9)


def test_a_row_stored_without_them_reads_back_without_them() -> None:
    read = PredictionResult.from_columns(as_columns(RESULT.model_copy(update={"band": None, "memory": None})))
    assert (read.band, read.memory, read.interval_ms()) == (None, None, None)


def test_the_clis_sqlite3_lookup_reads_back_the_band_and_the_verdict(tmp_path: Path) -> None:
    found = lookup_sqlite(stored_in_sqlite(tmp_path), ["k"])["k"]
    assert (found.band, found.memory, found.details) == (RESULT.band, RESULT.memory, RESULT.details)
    assert found.interval_ms(0.8) == RESULT.interval_ms(0.8)


def test_sqlalchemy_reads_back_the_same_from_the_same_file(tmp_path: Path) -> None:
    path = stored_in_sqlite(tmp_path)
    with session_scope(init_sqlite(f"sqlite:///{path}")) as session:
        row = get_by_key(session, "k")
        assert row is not None
        read = to_result(row)
    assert (read.band, read.memory, read.details) == (RESULT.band, RESULT.memory, RESULT.details)
