"""The bench applies a host setting's restrictions around one measurement and releases them on every exit path:
success, an exception, an interrupt, a refused restriction, an MPS child past its timeout."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from tests.fakes import (
    FakeMpsControl,
    FakeNvml,
    FakeTimer,
    RestrictionRecorder,
    child_log,
    done_measurement,
    h200_host,
    make_settings,
    write_fake_python,
)
from tests.waiting import alive, wait_for

from understudy.results import HostSetting
from understudy.workload import Workload
from engine.bench import Bench

WORKLOAD = Workload(model="resnet18", batch_size=16)
# What the spec estimator plans for an RTX 3060 (28 SMs, 1777 MHz, 12 GB) on the H200 with clock locking allowed.
LOCKED_GREEN = HostSetting(sm_count=32, sm_mechanism="green-context", clock_mhz=1770.0, clock_mode="locked",
                           memory_cap_gb=12.0)
LOCKED_MPS = LOCKED_GREEN.model_copy(update={"sm_count": 28, "sm_mechanism": "mps"})


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml) -> FakeTimer:
    fake = FakeTimer(nvml=nvml)
    monkeypatch.setattr("engine.timing.StepTimer", fake)
    return fake


def _bench(nvml: FakeNvml | None, **settings: object) -> Bench:
    return Bench(WORKLOAD, h200_host(), make_settings(**settings), nvml=nvml)


# In-process (green context) ---------------------------------------------------------------------------------------


def test_locked_setting_measures_under_the_lock_and_resets_it(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                              fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        result = bench.measure(LOCKED_GREEN)
    assert result.model_copy(update={"wall_s": None}) == fake_timer.result
    (call,) = fake_timer.calls
    assert call["locked_mhz"] == 1770
    assert call["clock_read"] == 1770.0
    assert nvml.events == [("lock", 1770), ("reset",)]
    assert nvml.locked_mhz is None


def test_green_context_and_memory_cap_wrap_the_measurement(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                           fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        bench.measure(LOCKED_GREEN)
    assert fake_timer.calls[0]["stream"] == "green-context-stream-32"
    assert recorder.events == [("enter", "memory-cap", 12.0), ("enter", "green-context", 32),
                               ("exit", "green-context", 32), ("exit", "memory-cap", 12.0)]


def test_bench_passes_the_timing_settings(nvml: FakeNvml, recorder: RestrictionRecorder,
                                          fake_timer: FakeTimer) -> None:
    with Bench(WORKLOAD, h200_host(), make_settings(timed_windows=7, window_ms=25.0, cudnn_benchmark=False),
               nvml=nvml) as bench:
        bench.measure(HostSetting(profile=True))
    (call,) = fake_timer.calls
    assert (call["workload"], call["windows"], call["window_ms"], call["profile"]) == (WORKLOAD, 7, 25.0, True)
    assert call["cudnn_benchmark"] is False
    assert call["stream"] is None


@pytest.mark.parametrize("error", [RuntimeError("CUDA error: an illegal memory access"), KeyboardInterrupt()])
def test_lock_green_context_and_cap_are_released_when_the_measurement_raises(
    nvml: FakeNvml, recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(error=error, nvml=nvml))
    with pytest.raises(type(error)):
        with _bench(nvml) as bench:
            bench.measure(LOCKED_GREEN)
    assert nvml.events == [("lock", 1770), ("reset",)]
    assert nvml.locked_mhz is None
    assert recorder.balanced() and recorder.events


def test_refused_clock_lock_is_a_failed_measurement_and_nothing_runs(recorder: RestrictionRecorder,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(refuse_lock=True)
    fake = FakeTimer(nvml=nvml)
    monkeypatch.setattr("engine.timing.StepTimer", fake)
    with _bench(nvml) as bench:
        result = bench.measure(LOCKED_GREEN)
    assert result.status == "failed"
    assert "could not lock the core clock at 1770 MHz" in (result.error or "")
    assert fake.calls == [] and recorder.events == []
    assert nvml.locked_mhz is None


def test_refused_green_context_is_a_failed_measurement_and_the_lock_is_reset(
    nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch, fake_timer: FakeTimer
) -> None:
    refusing = RestrictionRecorder(refuse_green_context=True)
    monkeypatch.setattr("engine.restrict.green_context", refusing.green_context)
    monkeypatch.setattr("engine.restrict.memory_cap", refusing.memory_cap)
    with _bench(nvml) as bench:
        result = bench.measure(LOCKED_GREEN)
    assert result.status == "failed"
    assert "could not create a green context of 32 SMs" in (result.error or "")
    assert fake_timer.calls == []
    assert nvml.events == [("lock", 1770), ("reset",)]
    assert refusing.balanced()


def test_clock_lock_without_nvml_is_a_failed_measurement(recorder: RestrictionRecorder,
                                                         fake_timer: FakeTimer) -> None:
    with _bench(None) as bench:
        result = bench.measure(LOCKED_GREEN)
    assert (result.status, result.error) == ("failed", "a clock lock needs NVML")
    assert fake_timer.calls == []


def test_emulated_clock_never_touches_the_lock_but_reads_the_clock(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                                   fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        bench.measure(LOCKED_GREEN.model_copy(update={"clock_mode": "emulated", "clock_mhz": 1777.0}))
    assert nvml.called("nvmlDeviceSetGpuLockedClocks") == nvml.called("nvmlDeviceResetGpuLockedClocks") == 0
    assert fake_timer.calls[0]["clock_read"] == 1755.0


def test_equal_settings_are_measured_once(nvml: FakeNvml, recorder: RestrictionRecorder,
                                          fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        first = bench.measure(LOCKED_GREEN)
        second = bench.measure(LOCKED_GREEN.model_copy())
    assert first is second
    assert len(fake_timer.calls) == 1


def test_each_measurement_records_what_its_setting_cost(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                        fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        result = bench.measure(LOCKED_GREEN)
    assert fake_timer.result.wall_s is None
    assert result.wall_s is not None and result.wall_s > 0


def test_in_process_settings_share_one_timer(nvml: FakeNvml, recorder: RestrictionRecorder,
                                             fake_timer: FakeTimer) -> None:
    with _bench(nvml) as bench:
        bench.measure(LOCKED_GREEN)
        bench.measure(LOCKED_GREEN.model_copy(update={"sm_count": 64}))
        bench.measure(HostSetting(memory_cap_gb=24.0))
    assert fake_timer.timers == [(WORKLOAD, 0)]
    assert [call["stream"] for call in fake_timer.calls] == ["green-context-stream-32", "green-context-stream-64",
                                                             None]


# MPS (child process under our own daemon) -------------------------------------------------------------------------


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeMpsControl:
    # The bench's daemon makes its folders with tempfile.mkdtemp: keep them in this test's folder.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return FakeMpsControl(tmp_path)


def test_mps_setting_runs_a_child_under_the_percentage_and_quits_the_daemon(
    tmp_path: Path, nvml: FakeNvml, control: FakeMpsControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure", done_measurement(min_ms=9.0))))
    with _bench(nvml, mps_control=str(control.path)) as bench:
        result = bench.measure(LOCKED_MPS)
        assert control.commands() == ["start"]
    assert control.commands() == ["start", "quit"]
    assert result.status == "done" and result.min_ms == 9.0
    (child,) = child_log(tmp_path)
    assert child["percentage"] == "22"
    assert child["pipe"] == control.entries()[0]["pipe"]
    assert child["request"]["workload"] == WORKLOAD.canonical()
    assert child["request"]["memory_cap_gb"] == 12.0


def test_mps_settings_make_no_timer_in_this_process(tmp_path: Path, nvml: FakeNvml, control: FakeMpsControl,
                                                    fake_timer: FakeTimer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    with _bench(nvml, mps_control=str(control.path)) as bench:
        bench.measure(LOCKED_MPS)
    assert fake_timer.timers == []


def test_mps_measurement_gets_the_clock_read_while_the_lock_is_held(
    tmp_path: Path, nvml: FakeNvml, control: FakeMpsControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    with _bench(nvml, mps_control=str(control.path)) as bench:
        result = bench.measure(LOCKED_MPS)
    assert result.observed_clock_mhz == 1770.0
    assert nvml.events == [("lock", 1770), ("reset",)]


def test_mps_child_past_the_job_timeout_fails_and_everything_is_released(
    tmp_path: Path, nvml: FakeNvml, control: FakeMpsControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "hang")))
    with _bench(nvml, mps_control=str(control.path), job_timeout_s=1) as bench:
        result = bench.measure(LOCKED_MPS)
    assert (result.status, result.error) == ("failed", "MPS child exceeded its 1 s limit")
    assert control.commands() == ["start", "quit"]
    assert nvml.events == [("lock", 1770), ("reset",)]
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    wait_for(lambda: not alive(grandchild), 5, "the MPS child's grandchild to end")


@pytest.mark.parametrize("error", [RuntimeError("broken pipe"), KeyboardInterrupt()])
def test_mps_daemon_quits_and_lock_resets_when_the_child_call_raises(
    nvml: FakeNvml, control: FakeMpsControl, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    def raising(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("engine.restrict.run_mps_child", raising)
    with pytest.raises(type(error)):
        with _bench(nvml, mps_control=str(control.path)) as bench:
            bench.measure(LOCKED_MPS)
    assert control.commands() == ["start", "quit"]
    assert nvml.events == [("lock", 1770), ("reset",)]


def test_mps_daemon_that_cannot_start_is_a_failed_measurement(tmp_path: Path, nvml: FakeNvml,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    control = FakeMpsControl(tmp_path, refuse_start=True)
    with _bench(nvml, mps_control=str(control.path)) as bench:
        result = bench.measure(LOCKED_MPS)
    assert result.status == "failed"
    assert "MPS daemon did not start" in (result.error or "")
    assert control.commands() == ["start"]
    assert nvml.locked_mhz is None


def test_several_mps_shares_use_one_daemon(tmp_path: Path, nvml: FakeNvml, control: FakeMpsControl,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    with _bench(nvml, mps_control=str(control.path)) as bench:
        bench.measure(LOCKED_MPS)
        bench.measure(LOCKED_MPS.model_copy(update={"sm_count": 66}))
    assert control.commands() == ["start", "quit"]
    assert [child["percentage"] for child in child_log(tmp_path)] == ["22", "50"]


def test_mps_daemon_that_cannot_start_fails_every_mps_setting(tmp_path: Path, nvml: FakeNvml,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    control = FakeMpsControl(tmp_path, refuse_start=True)
    with _bench(nvml, mps_control=str(control.path)) as bench:
        first = bench.measure(LOCKED_MPS)
        second = bench.measure(LOCKED_MPS.model_copy(update={"sm_count": 66}))
    assert first.status == "failed"
    assert second.status == "failed"
    assert child_log(tmp_path) == []


def test_green_contexts_are_measured_from_the_fewest_sms_up_and_the_whole_gpu_last() -> None:
    from engine.engine import measuring_order

    settings = [HostSetting(), HostSetting(sm_count=128, sm_mechanism="green-context"),
                HostSetting(sm_count=32, sm_mechanism="green-context")]
    assert [s.sm_count for s in sorted(settings, key=measuring_order)] == [32, 128, None]
