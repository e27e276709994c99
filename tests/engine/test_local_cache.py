"""The CLI's SQLite cache (cli.local.predict_cached): hits are served without predicting, misses are predicted
together, failures are tried again, and a measured result is keyed to the host that measured it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import FakeNvml, FakeTimer, RestrictionRecorder, h200_host, make_settings

from sqlalchemy import Engine as Database

from understudy.catalog import TargetSpec, catalog
from understudy.calibration import CalibrationSet
from understudy.keys import cache_key, expected_identity
from understudy.results import Measurement, PredictionResult
from ledger.db import init_sqlite
from ledger.sqlite_cache import lookup_sqlite
from understudy.workload import Workload
from engine.engine import Engine, Progress
from cli.local import lookup, predict_cached

WORKLOAD = Workload(model="test_vit", mode="infer")


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return init_sqlite(f"sqlite:///{tmp_path / 'cache.sqlite'}")


class CountingEngine(Engine):
    """An engine that records which targets it was asked to predict."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[list[str]] = []

    def predict(self, workload: Workload, targets: list[TargetSpec], estimator_name: str | None = None,
                progress: Progress | None = None) -> list[PredictionResult]:
        self.asked.append([t.id for t in targets])
        return super().predict(workload, targets, estimator_name, progress)


@pytest.fixture
def cpu_engine(no_gpu: None) -> CountingEngine:
    return CountingEngine(make_settings())


def test_second_call_is_served_from_the_cache_without_predicting(db: Database, cpu_engine: CountingEngine) -> None:
    targets = [catalog().get("t4"), catalog().get("l4")]
    first = predict_cached(cpu_engine, db, WORKLOAD, targets)
    again = predict_cached(cpu_engine, db, WORKLOAD, targets)
    assert [cached for _, cached in first] == [False, False]
    assert [cached for _, cached in again] == [True, True]
    assert cpu_engine.asked == [["t4", "l4"]]
    assert [r.latency_ms for r, _ in again] == [r.latency_ms for r, _ in first]


def test_only_the_targets_missing_from_the_cache_are_predicted(db: Database, cpu_engine: CountingEngine) -> None:
    predict_cached(cpu_engine, db, WORKLOAD, [catalog().get("t4")])
    rows = predict_cached(cpu_engine, db, WORKLOAD, [catalog().get("l4"), catalog().get("t4")])
    assert cpu_engine.asked == [["t4"], ["l4"]]
    assert [(r.target_id, cached) for r, cached in rows] == [("l4", False), ("t4", True)]


def test_cached_result_equals_the_fresh_one(db: Database, cpu_engine: CountingEngine) -> None:
    ((fresh, _),) = predict_cached(cpu_engine, db, WORKLOAD, [catalog().get("t4")])
    ((cached, hit),) = predict_cached(cpu_engine, db, WORKLOAD, [catalog().get("t4")])
    assert hit
    assert cached.model_dump(exclude={"details"}) == fresh.model_dump(exclude={"details"})


def test_failed_prediction_is_tried_again(db: Database, monkeypatch: pytest.MonkeyPatch,
                                          recorder: RestrictionRecorder) -> None:
    failing = FakeTimer(result=Measurement(status="failed", error="CUDA error: device busy"))
    monkeypatch.setattr("engine.timing.StepTimer", failing)
    engine = Engine(make_settings(), nvml=FakeNvml(), host=h200_host())
    predict_cached(engine, db, WORKLOAD, [catalog().get("t4")], "spec")
    ((result, cached),) = predict_cached(engine, db, WORKLOAD, [catalog().get("t4")], "spec")
    assert (result.status, cached) == ("failed", False)
    assert len(failing.calls) == 2


def test_measured_prediction_is_not_served_to_another_host(db: Database, monkeypatch: pytest.MonkeyPatch,
                                                           recorder: RestrictionRecorder) -> None:
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer())
    first_host = Engine(make_settings(), nvml=FakeNvml(), host=h200_host())
    other_host = Engine(make_settings(), nvml=FakeNvml(), host=h200_host(fingerprint="another-h200"))
    predict_cached(first_host, db, WORKLOAD, [catalog().get("t4")], "spec")
    ((_, cached),) = predict_cached(other_host, db, WORKLOAD, [catalog().get("t4")], "spec")
    assert not cached


# --- the torch-free lookup `understudy predict` answers a cached request with ------------------------------------

def keys_of(engine: Engine, targets: list[TargetSpec], estimator: str | None = None) -> list[str]:
    return [cache_key(WORKLOAD, t, engine.identity(estimator, t)) for t in targets]


def test_sqlite_lookup_reads_what_the_store_wrote(db: Database, tmp_path: Path, cpu_engine: CountingEngine) -> None:
    targets = [catalog().get("t4"), catalog().get("l4")]
    predict_cached(cpu_engine, db, WORKLOAD, targets)
    keys = keys_of(cpu_engine, targets)
    assert lookup_sqlite(tmp_path / "cache.sqlite", keys) == lookup(db, keys)
    assert set(lookup_sqlite(tmp_path / "cache.sqlite", keys)) == set(keys)


def test_sqlite_lookup_leaves_out_a_failed_prediction(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      recorder: RestrictionRecorder) -> None:
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(result=Measurement(status="failed", error="busy")))
    engine = Engine(make_settings(), nvml=FakeNvml(), host=h200_host())
    predict_cached(engine, db, WORKLOAD, [catalog().get("t4")], "spec")
    assert lookup_sqlite(tmp_path / "cache.sqlite", keys_of(engine, [catalog().get("t4")], "spec")) == {}


def test_sqlite_lookup_of_a_file_not_yet_made_finds_nothing(tmp_path: Path) -> None:
    assert lookup_sqlite(tmp_path / "none.sqlite", ["a" * 64]) == {}
    assert not (tmp_path / "none.sqlite").exists()


def test_cache_keys_need_no_engine(cpu_engine: CountingEngine) -> None:
    """understudy.keys.expected_identity, which `predict` uses before building an engine, is what the engine
    records: on a machine without a GPU, on a GPU host, and for the calibrated estimator."""
    for target in (catalog().get("t4"), catalog().get("l4")):
        assert expected_identity(None, target, cpu_engine.host, cpu_engine.settings) == cpu_engine.identity(None,
                                                                                                           target)
    gpu = Engine(make_settings(), nvml=FakeNvml(), host=h200_host())
    t4 = catalog().get("t4")
    for name in ("spec", "hostaware", "flops", "analytic", None):
        assert expected_identity(name, t4, gpu.host, gpu.settings) == gpu.identity(name, t4)
    calibrations = {"t4": CalibrationSet.model_validate({"points": [{"workload": {"model": "test_vit"},
                                                                     "measured_ms": 3.0}]})}
    for engine in (cpu_engine, gpu):
        for given in (calibrations, {}):
            assert expected_identity("calibrated", t4, engine.host, engine.settings, given) == engine.identity(
                "calibrated", t4, given)


def test_a_cache_file_made_before_a_column_was_added_gains_it_and_keeps_its_results(
        tmp_path: Path, cpu_engine: CountingEngine) -> None:
    path = tmp_path / "earlier.sqlite"
    first = predict_cached(cpu_engine, init_sqlite(f"sqlite:///{path}"), WORKLOAD, [catalog().get("t4")])
    with sqlite3.connect(path) as connection:
        connection.execute("ALTER TABLE predictions DROP COLUMN estimate")  # as an earlier version made the file

    again = predict_cached(cpu_engine, init_sqlite(f"sqlite:///{path}"), WORKLOAD,
                           [catalog().get("t4"), catalog().get("l4")])

    assert [cached for _, cached in again] == [True, False]
    assert again[0][0].latency_ms == first[0][0].latency_ms
