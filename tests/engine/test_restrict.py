"""Restrictions are released on every exit path: clock locks through a fake NVML, memory caps and green contexts
through fake CUDA calls, the MPS daemon through a fake control program, MPS children by killing their group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from tests.fakes import FakeMpsControl, FakeNvml, child_log, done_measurement, write_fake_python
from tests.waiting import alive, wait_for

from understudy.errors import RestrictionError
from engine import restrict

HANDLE = ("gpu", 0)


# Clock lock -------------------------------------------------------------------------------------------------------


def test_clock_lock_locks_then_resets(nvml: FakeNvml) -> None:
    with restrict.clock_lock(nvml, HANDLE, 1770.0) as clock:
        assert clock == 1770.0
        assert nvml.locked_mhz == 1770
    assert nvml.events == [("lock", 1770), ("reset",)]
    assert nvml.locked_mhz is None


def test_clock_lock_passes_whole_mhz_to_nvml(nvml: FakeNvml) -> None:
    with restrict.clock_lock(nvml, HANDLE, 1770.0):
        pass
    assert ("nvmlDeviceSetGpuLockedClocks", (HANDLE, 1770, 1770)) in nvml.calls


@pytest.mark.parametrize("error", [RuntimeError("the step failed"), KeyboardInterrupt(), SystemExit(1)])
def test_clock_lock_is_reset_when_the_body_raises(nvml: FakeNvml, error: BaseException) -> None:
    with pytest.raises(type(error)):
        with restrict.clock_lock(nvml, HANDLE, 1410.0):
            raise error
    assert nvml.events == [("lock", 1410), ("reset",)]
    assert nvml.locked_mhz is None


def test_refused_clock_lock_is_a_restriction_error_and_leaves_no_lock() -> None:
    nvml = FakeNvml(refuse_lock=True)
    with pytest.raises(RestrictionError, match="could not lock the core clock at 1770 MHz: Insufficient Permissions"):
        with restrict.clock_lock(nvml, HANDLE, 1770.0):
            pytest.fail("the body must not run without the lock")
    assert nvml.events == [("reset",)]
    assert nvml.locked_mhz is None


def test_reset_clocks_clears_a_lock_left_by_a_crashed_run() -> None:
    nvml = FakeNvml(locked_mhz=1005)
    restrict.reset_clocks(nvml, HANDLE)
    assert nvml.locked_mhz is None


# Memory cap -------------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_cuda_memory(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """torch.cuda's memory calls, recorded; the device has 141 GB."""
    import torch

    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=141e9))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, index=0: calls.append(("fraction", round(fraction, 6))))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty_cache", None)))
    return calls


def test_memory_cap_sets_the_targets_share_then_lifts_it(fake_cuda_memory: list[tuple[str, Any]]) -> None:
    with restrict.memory_cap(12.0):
        assert fake_cuda_memory == [("fraction", round(12 / 141, 6))]
    assert fake_cuda_memory[-1] == ("fraction", 1.0)


@pytest.mark.parametrize("error", [RuntimeError("out of memory"), KeyboardInterrupt()])
def test_memory_cap_is_lifted_when_the_body_raises(fake_cuda_memory: list[tuple[str, Any]],
                                                   error: BaseException) -> None:
    with pytest.raises(type(error)):
        with restrict.memory_cap(24.0):
            raise error
    assert fake_cuda_memory[-1] == ("fraction", 1.0)


def test_memory_cap_above_the_host_memory_is_no_cap(fake_cuda_memory: list[tuple[str, Any]]) -> None:
    with restrict.memory_cap(192.0):
        assert fake_cuda_memory == [("fraction", 1.0)]


def test_no_memory_cap_touches_nothing(fake_cuda_memory: list[tuple[str, Any]]) -> None:
    with restrict.memory_cap(None):
        pass
    assert fake_cuda_memory == []


# Green context ----------------------------------------------------------------------------------------------------


class _FakeGreenContexts:
    """torch.cuda.green_contexts in the two shapes the code handles: ctx.Stream(), or set_context/pop_context."""

    def __init__(self, with_stream: bool, refuse: bool = False) -> None:
        self.events: list[Any] = []
        events = self.events

        class GreenContext:
            def __init__(self, num_sms: int, device_id: int = 0) -> None:
                if refuse:
                    raise RuntimeError("CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION")
                events.append(("create", num_sms, device_id))

            def set_context(self) -> None:
                events.append("push")

            def pop_context(self) -> None:
                events.append("pop")

        if with_stream:
            GreenContext.Stream = lambda self: events.append("stream") or "green-stream"  # type: ignore[attr-defined]
        self.module = ModuleType("torch.cuda.green_contexts")
        self.module.GreenContext = GreenContext  # type: ignore[attr-defined]


@pytest.fixture
def green(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> _FakeGreenContexts:
    import torch

    fake = _FakeGreenContexts(**getattr(request, "param", {"with_stream": True}))
    monkeypatch.setitem(sys.modules, "torch.cuda.green_contexts", fake.module)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: fake.events.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: "current-context-stream")
    return fake


def test_green_context_yields_its_own_stream(green: _FakeGreenContexts) -> None:
    with restrict.green_context(32) as stream:
        assert stream == "green-stream"
    assert green.events == [("create", 32, 0), "stream", "synchronize"]


@pytest.mark.parametrize("green", [{"with_stream": False}], indirect=True)
@pytest.mark.parametrize("error", [None, RuntimeError("the step failed"), KeyboardInterrupt()])
def test_pushed_green_context_is_popped_on_every_exit(green: _FakeGreenContexts, error: BaseException | None) -> None:
    if error is None:
        with restrict.green_context(48) as stream:
            assert stream == "current-context-stream"
    else:
        with pytest.raises(type(error)):
            with restrict.green_context(48):
                raise error
    assert green.events == [("create", 48, 0), "push", "synchronize", "pop"]


def test_green_context_waits_for_its_work_when_the_body_raises(green: _FakeGreenContexts) -> None:
    with pytest.raises(RuntimeError):
        with restrict.green_context(16):
            raise RuntimeError("the step failed")
    assert green.events[-1] == "synchronize"


@pytest.mark.parametrize("green", [{"with_stream": True, "refuse": True}], indirect=True)
def test_refused_green_context_is_a_restriction_error(green: _FakeGreenContexts) -> None:
    with pytest.raises(RestrictionError, match="could not create a green context of 24 SMs"):
        with restrict.green_context(24):
            pytest.fail("the body must not run without the restriction")


# MPS daemon -------------------------------------------------------------------------------------------------------


def test_mps_daemon_starts_then_quits(tmp_path: Path) -> None:
    control = FakeMpsControl(tmp_path)
    with restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps")) as daemon:
        assert daemon.running
        assert control.commands() == ["start"]
    assert control.commands() == ["start", "quit"]
    assert not daemon.running


def test_mps_daemon_uses_private_folders_for_start_and_quit(tmp_path: Path) -> None:
    control = FakeMpsControl(tmp_path)
    with restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps")):
        pass
    start, quit_ = control.entries()
    assert start["pipe"] == quit_["pipe"] == str(tmp_path / "mps" / "pipe")
    assert start["log"] == quit_["log"] == str(tmp_path / "mps" / "log")
    assert (tmp_path / "mps" / "pipe").is_dir()


@pytest.mark.parametrize("error", [RuntimeError("the child failed"), KeyboardInterrupt()])
def test_mps_daemon_quits_when_the_body_raises(tmp_path: Path, error: BaseException) -> None:
    control = FakeMpsControl(tmp_path)
    with pytest.raises(type(error)):
        with restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps")):
            raise error
    assert control.commands() == ["start", "quit"]


def test_mps_daemon_stop_twice_quits_once(tmp_path: Path) -> None:
    control = FakeMpsControl(tmp_path)
    daemon = restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps"))
    daemon.start()
    daemon.stop()
    daemon.stop()
    assert control.commands() == ["start", "quit"]


def test_mps_daemon_never_started_sends_no_quit(tmp_path: Path) -> None:
    control = FakeMpsControl(tmp_path)
    restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps")).stop()
    assert control.commands() == []


def test_mps_daemon_that_fails_to_start_says_why_and_is_not_stopped(tmp_path: Path) -> None:
    control = FakeMpsControl(tmp_path, refuse_start=True)
    daemon = restrict.MpsDaemon(str(control.path), root=str(tmp_path / "mps"))
    with pytest.raises(RestrictionError, match="MPS daemon did not start: fake: An instance of this daemon"):
        daemon.start()
    daemon.stop()
    assert not daemon.running
    assert control.commands() == ["start"]


def test_missing_mps_control_program_is_a_restriction_error(tmp_path: Path) -> None:
    daemon = restrict.MpsDaemon(str(tmp_path / "no-such-control"), root=str(tmp_path / "mps"))
    with pytest.raises(RestrictionError, match="not found"):
        daemon.start()


# MPS child --------------------------------------------------------------------------------------------------------


def _daemon(tmp_path: Path) -> restrict.MpsDaemon:
    return restrict.MpsDaemon(str(FakeMpsControl(tmp_path).path), root=str(tmp_path / "mps"))


def test_mps_child_runs_under_the_share_and_returns_its_measurement(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    measured = done_measurement(min_ms=7.25, observed_clock_mhz=1755.0)
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure", measured)))
    request = {"workload": {"model": "resnet18"}, "memory_cap_gb": 12.0, "windows": 3, "window_ms": 5.0}
    result = restrict.run_mps_child(_daemon(tmp_path), 22, request, timeout_s=30, gpu_index=3)
    assert result == measured
    (entry,) = child_log(tmp_path)
    assert entry["argv"] == ["-m", "engine.mps_child"]
    assert entry["request"] == request
    assert entry["percentage"] == "22"
    assert entry["visible"] == "3"
    assert entry["pipe"] == str(tmp_path / "mps" / "pipe")


def test_mps_child_is_told_to_die_with_the_process_that_started_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    restrict.run_mps_child(_daemon(tmp_path), 50, {"workload": {"model": "resnet18"}}, timeout_s=30)
    (entry,) = child_log(tmp_path)
    assert entry["parent"] == str(os.getpid())


def test_mps_child_past_its_timeout_is_killed_with_its_process_group(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "hang")))
    started = time.monotonic()
    result = restrict.run_mps_child(_daemon(tmp_path), 50, {"workload": {}}, timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert result.status == "failed"
    assert result.error == "MPS child exceeded its 1 s limit"
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    wait_for(lambda: not alive(grandchild), 5, "the MPS child's grandchild to end")


def test_mps_child_that_crashes_is_a_failed_measurement_with_its_last_words(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "crash")))
    result = restrict.run_mps_child(_daemon(tmp_path), 50, {"workload": {}}, timeout_s=30)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("MPS child exited 3: ")
    assert "RuntimeError: CUDA driver gave up" in result.error
