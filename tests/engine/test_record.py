"""Recording an evaluation's host measurements without estimating (`understudy evaluate --measure-only`): what the
estimators would need goes into the measurement log, once, within the time budget. A fake NVML, recorded
restrictions and a fake timer stand in for the GPU; the plans come from a CSV in the ground truth's format."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakes import FakeNvml, FakeTimer, RestrictionRecorder, h200_host, make_settings

from understudy.results import HostSetting
from understudy.workload import workload_from_row
from worker.engine import Engine
from worker.evaluate import Plan, plan_sample, read_rows, record
from worker.measurement_log import MeasurementLog

COLUMNS = ("target", "model", "mode", "precision", "batch_size", "resolution", "memory_format", "optimizer",
           "latency_ms")


def row(model: str, target: str = "GeForce RTX 3090") -> dict[str, str]:
    return {"target": target, "model": model, "mode": "infer", "precision": "amp-fp16", "batch_size": "256",
            "resolution": "224", "memory_format": "nchw", "optimizer": "none", "latency_ms": "12.5"}


def plans_of(tmp_path: Path, rows: list[dict[str, str]]) -> list[Plan]:
    path = tmp_path / "groundtruth.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return plan_sample(read_rows([path]), per_mode=None, seed=0)


# Two workloads, the first measured on two targets.
ROWS = [row("resnet18"), row("resnet18", "GeForce RTX 4090"), row("mobilenetv3_small_075")]


def engine_on(log_path: Path, nvml: FakeNvml) -> Engine:
    return Engine(make_settings(), nvml=nvml, host=h200_host(), log=MeasurementLog(log_path))


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml) -> FakeTimer:
    fake = FakeTimer(nvml=nvml)
    monkeypatch.setattr("worker.timing.StepTimer", fake)
    return fake


def test_recording_logs_one_profiled_host_measurement_per_workload(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    plans = plans_of(tmp_path, ROWS)
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans, ["hostaware", "flops"])
    assert count == 2
    # flops's unprofiled setting is served by hostaware's profiled measurement: one each, for every target.
    assert [call["profile"] for call in fake_timer.calls] == [True, True]
    log = MeasurementLog(tmp_path / "log.jsonl")
    for plan in plans:
        assert log.get(h200_host(), workload_from_row(plan.rows[0]), HostSetting(profile=True)) is not None


def test_recording_again_measures_nothing_new(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    plans = plans_of(tmp_path, ROWS)
    record(engine_on(tmp_path / "log.jsonl", nvml), plans, ["hostaware"])
    measured = len(fake_timer.calls)
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans, ["hostaware"])
    assert count == 2
    assert len(fake_timer.calls) == measured


def test_a_spent_budget_stops_before_the_next_workload(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each measurement takes 10 s of the run's clock; the budget is spent by the first.
    monkeypatch.setattr("worker.evaluate.time", SimpleNamespace(monotonic=lambda: 10.0 * len(fake_timer.calls)))
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans_of(tmp_path, ROWS), ["hostaware"], budget_s=5.0)
    assert count == 1
    assert len(fake_timer.calls) == 1


def test_a_model_not_in_timm_is_skipped_and_the_run_goes_on(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    plans = plans_of(tmp_path, [row("not_a_timm_model"), *ROWS])
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans, ["hostaware"])
    assert count == 2
    assert sorted(call["workload"].model for call in fake_timer.calls) == ["mobilenetv3_small_075", "resnet18"]


def test_a_model_that_fails_to_build_is_not_counted_as_recorded(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("worker.timing.StepTimer", FakeTimer(error=RuntimeError("could not build the model")))
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans_of(tmp_path, ROWS), ["hostaware"])
    assert count == 0
    assert not (tmp_path / "log.jsonl").exists()


def test_estimators_that_need_no_gpu_record_nothing(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans_of(tmp_path, ROWS), ["analytic"])
    assert count == 0
    assert fake_timer.calls == []
    assert not (tmp_path / "log.jsonl").exists()


def test_a_target_missing_from_the_catalog_leaves_the_workloads_other_targets_measured(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    plans = plans_of(tmp_path, [row("resnet18", "No Such GPU 9000"), row("resnet18")])
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans, ["spec"])
    assert count == 1
    assert len(fake_timer.calls) == 1
