"""The engine: picks the estimator the machine can run, measures each distinct host setting once, and leaves the
GPU as it found it. GPU paths use a fake NVML, recorded restrictions and a fake timer (no CUDA here)."""

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

from understudy.bands import band_model
from understudy.catalog import InlineTarget, catalog
from understudy.errors import NoGpu, UnknownEstimator
from understudy.keys import ANY_HOST
from understudy.results import HostSetting, Measurement, Status
from understudy.workload import Workload
from engine.engine import Engine
from engine.probe import nvml_view, probe_host

WORKLOAD = Workload(model="resnet18", batch_size=32)
RTX_3060 = catalog().get("rtx-3060")


@pytest.fixture
def cpu_engine(no_gpu: None) -> Engine:
    return Engine(make_settings())


def gpu_engine(nvml: FakeNvml, **settings: object) -> Engine:
    return Engine(make_settings(**settings), nvml=nvml, host=h200_host())


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml) -> FakeTimer:
    fake = FakeTimer(nvml=nvml)
    monkeypatch.setattr("engine.timing.StepTimer", fake)
    return fake


# Without a GPU ----------------------------------------------------------------------------------------------------


def test_machine_without_gpu_defaults_to_analytic(cpu_engine: Engine) -> None:
    assert not cpu_engine.host.has_gpu
    assert cpu_engine.default_estimator() == "analytic"
    assert "only the analytic estimator can run" in (cpu_engine.host.note or "")


@pytest.mark.parametrize("name", ["spec", "flops", "hostaware"])
def test_gpu_estimator_without_a_gpu_is_a_clear_error(cpu_engine: Engine, name: str) -> None:
    with pytest.raises(NoGpu, match=f"estimator '{name}' times the workload on an NVIDIA GPU and this machine has "
                       "none; use --estimator analytic"):
        cpu_engine.predict(WORKLOAD, [RTX_3060], name)


def test_unknown_estimator_is_an_error(cpu_engine: Engine) -> None:
    with pytest.raises(UnknownEstimator):
        cpu_engine.predict(WORKLOAD, [RTX_3060], "magic")


def test_analytic_prediction_is_complete_and_host_independent(cpu_engine: Engine) -> None:
    (result,) = cpu_engine.predict(WORKLOAD, [RTX_3060])
    assert result.status == Status.done
    assert (result.estimator, result.target_id, result.workload_digest) == ("analytic", RTX_3060.id, WORKLOAD.digest())
    assert result.host_fingerprint == ANY_HOST and result.host_name is None
    assert result.host_setting is None and result.timing_mode == "none"
    assert result.latency_ms is not None and result.latency_ms > 0
    assert result.samples_per_s == pytest.approx(32 * 1000 / result.latency_ms)


def test_a_done_prediction_carries_the_band_of_its_mode_target_and_convolution_share(cpu_engine: Engine) -> None:
    [result] = cpu_engine.predict(WORKLOAD, [RTX_3060], "analytic")
    model = band_model()
    share = result.details["convolution_share"]
    assert result.band == model.band(model.features("analytic", "train", RTX_3060, share))
    assert result.band is not None and result.band.basis.startswith("analytic train, Ampere")


def test_a_compiled_workloads_prediction_carries_the_compiled_band(cpu_engine: Engine) -> None:
    compiled = WORKLOAD.model_copy(update={"compile": True})
    [result] = cpu_engine.predict(compiled, [RTX_3060], "analytic")
    model = band_model()
    share = result.details["convolution_share"]
    assert result.band == model.band(model.features("analytic", "train", RTX_3060, share, compiled=True))
    assert result.band is not None and result.band.basis.endswith("compiled")


def test_a_done_prediction_says_whether_it_fits_the_targets_memory(cpu_engine: Engine) -> None:
    # ResNet-18 training at batch 32 takes a GB or two: far under the 3060's 12.
    [result] = cpu_engine.predict(WORKLOAD, [RTX_3060], "analytic")
    assert result.memory is not None and result.memory.verdict == "fits"
    assert result.memory.capacity_gb == 12 and 0 < result.memory.peak_gb < 4


def test_one_result_per_target_in_order(cpu_engine: Engine) -> None:
    names = ["t4", "rtx-4090", "rtx-3060"]
    results = cpu_engine.predict(WORKLOAD, [catalog().get(n) for n in names])
    assert [r.target_id for r in results] == ["t4", "rtx-4090", "rtx-3060-12-gb"]


def test_probe_without_nvml_says_only_analytic_can_run(no_gpu: None) -> None:
    host = probe_host(0, None)
    assert host.gpu_name is None and host.fingerprint.startswith("cpu-")
    assert host.torch is not None


# The host probe through a fake NVML -------------------------------------------------------------------------------


def test_probe_describes_the_gpu_nvml_reports() -> None:
    host = probe_host(0, FakeNvml())
    assert (host.gpu_name, host.compute_capability, host.memory_gb) == ("NVIDIA H200", "9.0", 141.0)
    assert (host.max_sm_clock_mhz, host.current_sm_clock_mhz) == (1980.0, 1755.0)
    assert host.supported_clocks_mhz == sorted(set(host.supported_clocks_mhz))
    assert (min(host.supported_clocks_mhz), max(host.supported_clocks_mhz)) == (345.0, 1980.0)


def test_host_fingerprint_is_stable_and_changes_with_the_driver() -> None:
    first, again = probe_host(0, FakeNvml()), probe_host(0, FakeNvml())
    assert first.fingerprint == again.fingerprint
    assert probe_host(0, FakeNvml(driver="590.10")).fingerprint != first.fingerprint


def test_probe_of_a_missing_gpu_index_says_so() -> None:
    host = probe_host(3, FakeNvml())
    assert not host.has_gpu and host.note == "GPU 3 does not exist (1 found)"



@pytest.mark.parametrize("gpu_index", [0, 3])
def test_nvml_alone_tells_whether_there_is_a_gpu_as_the_probe_does(gpu_index: int) -> None:
    seen, probed = nvml_view(gpu_index, FakeNvml()), probe_host(gpu_index, FakeNvml())
    assert (seen.gpu_name, seen.note) == (probed.gpu_name, probed.note)
    assert seen.sm_count is None and seen.torch is None


def test_without_nvml_the_view_has_no_gpu_and_says_why() -> None:
    assert nvml_view(0, None).note == "no NVIDIA GPU found (NVML unavailable): only the analytic estimator can run"

# With a (fake) GPU ------------------------------------------------------------------------------------------------


def test_gpu_host_defaults_to_hostaware(nvml: FakeNvml) -> None:
    assert gpu_engine(nvml).default_estimator() == "hostaware"


def test_engine_allowed_to_lock_clears_a_lock_left_by_a_crashed_run() -> None:
    nvml = FakeNvml(locked_mhz=1005)
    gpu_engine(nvml, allow_clock_lock=True)
    assert nvml.locked_mhz is None and nvml.events == [("reset",)]


def test_engine_not_allowed_to_lock_never_touches_the_clocks(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                             fake_timer: FakeTimer) -> None:
    (result,) = gpu_engine(nvml).predict(WORKLOAD, [RTX_3060], "spec")
    assert result.status == Status.done
    assert result.host_setting is not None and result.host_setting.clock_mode == "emulated"
    assert nvml.events == []


def test_spec_with_clock_lock_locks_the_nearest_clock_and_resets_it(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                                    fake_timer: FakeTimer) -> None:
    (result,) = gpu_engine(nvml, allow_clock_lock=True).predict(WORKLOAD, [RTX_3060], "spec")
    assert result.status == Status.done
    assert nvml.events == [("reset",), ("lock", 1770), ("reset",)]
    assert fake_timer.calls[0]["locked_mhz"] == 1770
    assert nvml.locked_mhz is None
    setting = result.host_setting
    assert setting is not None
    assert (setting.sm_count, setting.sm_mechanism, setting.clock_mhz, setting.clock_mode) == (
        32, "green-context", 1770.0, "locked")
    assert recorder.balanced()


@pytest.mark.parametrize("error", [RuntimeError("CUDA error: unspecified launch failure"), KeyboardInterrupt()])
def test_no_lock_is_left_behind_when_measuring_raises(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                      monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(error=error, nvml=nvml))
    engine = gpu_engine(nvml, allow_clock_lock=True)
    with pytest.raises(type(error)):
        engine.predict(WORKLOAD, [RTX_3060, catalog().get("t4")], "spec")
    assert nvml.locked_mhz is None
    assert nvml.events[-2:] == [("lock", 1770), ("reset",)]
    assert recorder.balanced()


def test_each_target_gets_its_own_lock_and_every_lock_is_reset(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                               fake_timer: FakeTimer) -> None:
    gpu_engine(nvml, allow_clock_lock=True).predict(WORKLOAD, [RTX_3060, catalog().get("rtx-5090")], "spec")
    assert nvml.events == [("reset",), ("lock", 1770), ("reset",), ("lock", 1980), ("reset",)]


def test_targets_with_the_same_setting_share_one_measurement(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                             fake_timer: FakeTimer) -> None:
    figures = {"sm_count": 30, "boost_clock_mhz": 1500, "memory_bandwidth_gbps": 400, "memory_size_gb": 8}
    twins = [InlineTarget(name=name, **figures).to_spec() for name in ("card A", "card B")]  # type: ignore[arg-type]
    results = gpu_engine(nvml).predict(WORKLOAD, twins, "spec")
    assert len(fake_timer.calls) == 1
    assert results[0].latency_ms == results[1].latency_ms


def test_targets_differing_only_in_an_emulated_clock_share_one_measurement(
    nvml: FakeNvml, recorder: RestrictionRecorder, fake_timer: FakeTimer
) -> None:
    figures = {"sm_count": 30, "memory_bandwidth_gbps": 400, "memory_size_gb": 8}
    slow, fast = (InlineTarget(name=f"{mhz} MHz card", boost_clock_mhz=mhz, **figures).to_spec()  # type: ignore[arg-type]
                  for mhz in (1000, 2000))
    results = gpu_engine(nvml).predict(WORKLOAD, [slow, fast], "spec")
    assert len(fake_timer.calls) == 1
    assert results[0].latency_ms == pytest.approx(2 * results[1].latency_ms)


def test_locked_clocks_are_measured_apart(nvml: FakeNvml, recorder: RestrictionRecorder,
                                          fake_timer: FakeTimer) -> None:
    figures = {"sm_count": 30, "memory_bandwidth_gbps": 400, "memory_size_gb": 8}
    cards = [InlineTarget(name=f"{mhz} MHz card", boost_clock_mhz=mhz, **figures).to_spec()  # type: ignore[arg-type]
             for mhz in (1005, 1500)]
    gpu_engine(nvml, allow_clock_lock=True).predict(WORKLOAD, cards, "spec")
    assert len(fake_timer.calls) == 2


def test_hostaware_measures_once_for_all_targets(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                 fake_timer: FakeTimer) -> None:
    targets = [catalog().get(n) for n in ("t4", "rtx-3060", "rtx-4090", "rtx-5090")]
    results = gpu_engine(nvml).predict(WORKLOAD, targets)
    assert len(fake_timer.calls) == 1 and fake_timer.calls[0]["profile"] is True
    assert {r.estimator for r in results} == {"hostaware"}
    assert all(r.status == Status.done and r.host_name == "NVIDIA H200" for r in results)
    assert all(r.host_fingerprint == "fake-h200" for r in results)


def test_measured_result_records_its_measurement_and_timing_mode(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                                 fake_timer: FakeTimer) -> None:
    (result,) = gpu_engine(nvml).predict(WORKLOAD, [RTX_3060], "spec")
    assert result.timing_mode == "graph"
    assert result.details["measurement"]["min_ms"] == 10.0


def test_failed_measurement_is_a_failed_result_not_an_exception(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    failed = Measurement(status="failed", error="cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(result=failed))
    (result,) = gpu_engine(nvml).predict(WORKLOAD, [RTX_3060], "spec")
    assert (result.status, result.error, result.latency_ms, result.samples_per_s) == (
        Status.failed, failed.error, None, None)


def test_workload_too_big_for_the_target_is_reported_as_oom(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # ResNet-50 AMP training at batch 1024 needs about 47 GB (engine.estimators.memory): even the low end of its band
    # is over the 3060's 12 GB, whatever the host's own peak was.
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(result=done_measurement(peak_memory_gb=1.0)))
    results = gpu_engine(nvml).predict(Workload(model="resnet50", batch_size=1024), [RTX_3060], "spec")
    [oom] = results
    assert oom.status == Status.oom and oom.latency_ms is None and oom.band is None
    assert oom.memory is not None and oom.memory.verdict == "oom" and oom.memory.low_gb > 12


def test_a_target_whose_memory_lies_inside_the_peaks_band_is_predicted_and_called_tight(
        nvml: FakeNvml, recorder: RestrictionRecorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.timing.StepTimer", FakeTimer(result=done_measurement(peak_memory_gb=1.0)))
    engine = gpu_engine(nvml)
    [roomy] = engine.predict(WORKLOAD, [catalog().get("rtx-3090")], "spec")
    assert roomy.memory is not None
    # The same card with memory halfway between the ends of the peak's band: it may or may not fit.
    edge = catalog().get("rtx-3090").model_copy(update={
        "memory_size_gb": (roomy.memory.low_gb + roomy.memory.high_gb) / 2})

    [tight] = engine.predict(WORKLOAD, [edge], "spec")

    assert roomy.status == Status.done and roomy.memory.verdict == "fits"
    assert tight.status == Status.done and tight.latency_ms == roomy.latency_ms
    assert tight.memory is not None and tight.memory.verdict == "tight"
    assert tight.memory.low_gb < tight.memory.capacity_gb < tight.memory.high_gb


def test_host_missing_from_the_catalog_fails_each_ratio_prediction(nvml: FakeNvml, recorder: RestrictionRecorder,
                                                                   fake_timer: FakeTimer) -> None:
    engine = Engine(make_settings(), nvml=nvml, host=h200_host(gpu_name="NVIDIA Voodoo 2"))
    (result,) = engine.predict(WORKLOAD, [RTX_3060], "flops")
    assert result.status == Status.failed and "not in the catalog" in (result.error or "")


def test_mps_engine_runs_children_under_one_daemon_and_quits_it(
    tmp_path: Path, nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "measure")))
    control = FakeMpsControl(tmp_path)
    engine = gpu_engine(nvml, sm_mechanism="mps", mps_control=str(control.path), allow_clock_lock=True)
    results = engine.predict(WORKLOAD, [RTX_3060, catalog().get("rtx-3090")], "spec")
    assert [r.status for r in results] == [Status.done, Status.done]
    assert [r.host_setting.sm_count for r in results if r.host_setting] == [28, 82]
    assert [c["percentage"] for c in child_log(tmp_path)] == ["22", "63"]
    assert control.commands() == ["start", "quit"]
    assert nvml.locked_mhz is None


def test_mps_child_timeout_fails_that_target_and_still_quits_the_daemon(
    tmp_path: Path, nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(write_fake_python(tmp_path, "hang")))
    control = FakeMpsControl(tmp_path)
    engine = gpu_engine(nvml, sm_mechanism="mps", mps_control=str(control.path), job_timeout_s=1,
                        allow_clock_lock=True)
    (result,) = engine.predict(WORKLOAD, [RTX_3060], "spec")
    assert (result.status, result.error) == (Status.failed, "MPS child exceeded its 1 s limit")
    assert control.commands() == ["start", "quit"]
    assert nvml.locked_mhz is None and nvml.events[-1] == ("reset",)


def test_a_host_setting_description_names_the_share_clock_and_memory_cap() -> None:
    text = HostSetting(sm_count=32, sm_mechanism="green-context", clock_mhz=1777.0, clock_mode="emulated").describe()
    assert text == "32 SMs (green-context), 1777 MHz (emulated)"
    assert HostSetting(memory_cap_gb=12.0).describe() == "all SMs, memory capped at 12 GB"
    assert HostSetting().describe() == "all SMs"
