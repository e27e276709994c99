"""Recording an evaluation's host measurements without estimating (`understudy evaluate --measure-only`): what the
estimators would need goes into the measurement log, once, within the time budget. A fake NVML, recorded
restrictions and a fake timer stand in for the GPU; the plans come from a CSV in the ground truth's format.

With a time limit per workload the measuring runs in a child process: a workload past its limit, or one that takes
the child down, is logged as failed and the run goes on with a fresh child. A fake child program stands in for
`python -m evaluation.record_child` there; the child's own loop runs in-process on the fakes."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.fakes import PYTHON, FakeNvml, FakeTimer, RestrictionRecorder, h200_host, make_settings

from understudy.results import HostSetting
from understudy.workload import workload_from_row
from engine.engine import Engine
from evaluation.evaluate import Plan, plan_sample, read_rows
from evaluation.recording import record
from engine.measurement_log import MeasurementLog
from evaluation.record_child import serve

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
    monkeypatch.setattr("engine.timing.StepTimer", fake)
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
    monkeypatch.setattr("evaluation.recording.time", SimpleNamespace(monotonic=lambda: 10.0 * len(fake_timer.calls)))
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
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(error=RuntimeError("could not build the model")))
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


# In a child, with a time limit per workload -----------------------------------------------------------------------

HANGS, CRASHES = "resnet34", "resnet26"

# Plays the child: logs each start and answers every workload, but hangs on HANGS and dies on CRASHES.
FAKE_CHILD = """#!{python}
import json, sys, time
with open({starts!r}, "a") as f:
    f.write(sys.argv[-1] + "\\n")
for line in sys.stdin:
    model = json.loads(line)["rows"][0]["model"]
    if model == {hangs!r}:
        time.sleep(60)
    if model == {crashes!r}:
        sys.exit(3)
    print("library chatter", flush=True)
    print(json.dumps({{"logged": True}}), flush=True)
"""


@pytest.fixture
def starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake child in sys.executable's place; returns the file where it logs its starts."""
    path, starts = tmp_path / "fake-python", tmp_path / "starts.log"
    path.write_text(FAKE_CHILD.format(python=PYTHON, starts=str(starts), hangs=HANGS, crashes=CRASHES))
    path.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(path))
    return starts


def logged_error(log_path: Path, model: str) -> str | None:
    measured = MeasurementLog(log_path).get(h200_host(), workload_from_row(row(model)), HostSetting(profile=True))
    return measured.error if measured is not None else None


def test_a_workload_past_its_limit_is_logged_as_failed_and_the_next_gets_a_fresh_child(
    tmp_path: Path, nvml: FakeNvml, starts: Path
) -> None:
    log_path = tmp_path / "log.jsonl"
    plans = plans_of(tmp_path, [row(HANGS), row("resnet18")])
    plans.sort(key=lambda plan: plan.rows[0]["model"] != HANGS)

    count = record(engine_on(log_path, nvml), plans, ["hostaware"], timeout_s=1.0)

    assert count == 1
    assert logged_error(log_path, HANGS) == "measuring exceeded its 1 s limit"
    assert len(starts.read_text().splitlines()) == 2


def test_a_workload_that_takes_the_child_down_is_logged_with_its_exit_status(
    tmp_path: Path, nvml: FakeNvml, starts: Path
) -> None:
    log_path = tmp_path / "log.jsonl"
    count = record(engine_on(log_path, nvml), plans_of(tmp_path, [row(CRASHES)]), ["hostaware"],
                   timeout_s=30.0)
    assert count == 0
    assert logged_error(log_path, CRASHES) == "the recording process died measuring it (exit status 3)"


def test_workloads_within_their_limit_share_one_child(tmp_path: Path, nvml: FakeNvml, starts: Path) -> None:
    count = record(engine_on(tmp_path / "log.jsonl", nvml), plans_of(tmp_path, ROWS), ["hostaware"], timeout_s=30.0)
    assert count == 2
    (config,) = starts.read_text().splitlines()
    assert json.loads(config)["estimators"] == ["hostaware"]


def test_the_child_answers_each_workload_with_whether_it_was_logged(
    tmp_path: Path, nvml: FakeNvml, recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeTimer(nvml=nvml)
    monkeypatch.setattr("engine.timing.StepTimer", fake)
    plans = plans_of(tmp_path, [row("resnet18"), row("not_a_timm_model")])
    requests = io.StringIO("".join(json.dumps({"key": p.key, "rows": p.rows}) + "\n" for p in plans))
    replies = io.StringIO()

    serve(engine_on(tmp_path / "log.jsonl", nvml), ["hostaware"], requests, replies)

    answers = {plan.rows[0]["model"]: json.loads(line)["logged"]
               for plan, line in zip(plans, replies.getvalue().splitlines(), strict=True)}
    assert answers == {"resnet18": True, "not_a_timm_model": False}
    assert len(fake.calls) == 1
