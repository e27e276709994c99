"""A sweep: one workload on many in-process settings. The bench builds the step once and, for each distinct setting,
captures a fresh CUDA graph on that setting's stream and drops it afterwards; an OOM under one memory cap is that
setting's result and the next setting is measured as usual. torch.cuda is tests/fakes.FakeCuda (no CUDA here)."""

from __future__ import annotations

import pytest
from tests.fakes import FakeCuda, RestrictionRecorder, h200_host, make_settings

from understudy.results import HostSetting
from understudy.workload import Workload
from engine.bench import Bench
from engine.timing import measure

WORKLOAD = Workload(model="resnet50", batch_size=16, precision="fp32")


def green(sm_count: int, memory_cap_gb: float = 24.0) -> HostSetting:
    return HostSetting(sm_count=sm_count, sm_mechanism="green-context", clock_mhz=1695.0, clock_mode="emulated",
                       memory_cap_gb=memory_cap_gb)


def sweep(cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch, settings: list[HostSetting]) -> list:
    cuda.install(monkeypatch)
    with Bench(WORKLOAD, h200_host(), make_settings()) as bench:
        return [bench.measure(setting) for setting in settings]


def test_a_sweep_builds_the_step_once_and_captures_one_graph_per_setting(
    recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda = FakeCuda()
    results = sweep(cuda, monkeypatch, [green(24), green(40), green(64), green(128)])
    assert cuda.builds() == [True]
    assert cuda.captures() == [f"green-context-stream-{sms}" for sms in (24, 40, 64, 128)]
    assert [(r.status, r.timing_mode) for r in results] == [("done", "graph")] * 4


def test_each_settings_graph_is_dropped_when_the_setting_ends(recorder: RestrictionRecorder,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    sweep(cuda, monkeypatch, [green(24), green(40)])
    kinds = [event[0] for event in cuda.events]
    assert kinds == ["build", "capture", "graph reset", "empty cache", "capture", "graph reset", "empty cache"]
    assert recorder.balanced()


def test_equal_settings_in_a_sweep_are_measured_once(recorder: RestrictionRecorder,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    first, again, other = sweep(cuda, monkeypatch, [green(40), green(40), green(64)])
    assert again is first and other is not first
    assert cuda.captures() == ["green-context-stream-40", "green-context-stream-64"]


def test_an_oom_on_one_setting_leaves_the_next_measurable(recorder: RestrictionRecorder,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(oom_streams=("green-context-stream-40",))
    results = sweep(cuda, monkeypatch, [green(24), green(40, memory_cap_gb=4.0), green(64)])
    assert [r.status for r in results] == ["done", "oom", "done"]
    assert results[2].timing_mode == "graph"
    assert cuda.captures() == ["green-context-stream-24", "green-context-stream-64"]
    assert recorder.balanced()


def test_an_oom_while_capturing_is_an_oom_not_a_fall_back_to_eager_timing(recorder: RestrictionRecorder,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(oom_in_capture=("green-context-stream-40",))
    results = sweep(cuda, monkeypatch, [green(40, memory_cap_gb=4.0), green(64)])
    assert [(r.status, r.timing_mode) for r in results] == [("oom", "none"), ("done", "graph")]
    assert False not in cuda.builds()
    assert cuda.resets() == ["green-context-stream-40", "green-context-stream-64"]


def test_a_model_that_cannot_be_captured_is_rebuilt_once_for_eager_timing_and_kept(
    recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda = FakeCuda(refuse_capture=True)
    results = sweep(cuda, monkeypatch, [green(24), green(40), green(64)])
    assert cuda.builds() == [True, False]
    assert [e for e in cuda.events if e[0] == "capture refused"] == [("capture refused", "green-context-stream-24")]
    assert [r.timing_mode for r in results] == ["eager"] * 3
    assert all((r.error or "").startswith("graph capture failed, timed eagerly: CUDA error") for r in results)
    # Profiled, unasked: an eager step's GPU time is its kernels' (Measurement.device_share).
    assert all(r.kernel_ms for r in results)


def test_the_build_counts_in_the_first_settings_wall_time_only(recorder: RestrictionRecorder,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = sweep(FakeCuda(build_s=0.3), monkeypatch, [green(24), green(40)])
    assert first.wall_s is not None and first.wall_s >= 0.3
    assert second.wall_s is not None and second.wall_s < 0.3


def test_settings_that_leave_the_sms_alone_run_on_the_timers_own_stream(recorder: RestrictionRecorder,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    sweep(cuda, monkeypatch, [HostSetting(memory_cap_gb=24.0), green(40), HostSetting(memory_cap_gb=80.0)])
    assert cuda.captures() == ["side-stream-1", "green-context-stream-40", "side-stream-1"]


def test_measure_builds_and_times_once_on_a_side_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda().install(monkeypatch)
    result = measure(WORKLOAD, windows=3, window_ms=5.0)
    assert (result.status, result.timing_mode, result.windows) == ("done", "graph", 3)
    assert cuda.builds() == [True]
    assert cuda.captures() == cuda.resets() == ["side-stream-1"]


def test_a_compiled_workloads_compile_is_timed_apart_from_its_step(recorder: RestrictionRecorder,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(first_call_s=0.3).install(monkeypatch)
    compiled = measure(WORKLOAD.model_copy(update={"compile": True}), windows=3, window_ms=5.0)
    # The first call (torch.compile compiling) is made as the step is built: the timed steps after it take what an
    # eager step's do, and the compile shows in compile_s alone.
    assert compiled.compile_s is not None and compiled.compile_s >= 0.3
    eager = measure(WORKLOAD, windows=3, window_ms=5.0)
    assert eager.compile_s is None
    assert (compiled.status, compiled.timing_mode, compiled.min_ms) == ("done", "graph", eager.min_ms)
    assert cuda.builds() == [True, True]
