"""The bench: time a workload on the host under a HostSetting, applying and releasing the restrictions it names.

One bench holds one workload; equal settings are measured once, so targets that map to the same setting share a
measurement. Green contexts (and settings that leave the SMs alone) run in this process, on one step built on the
first of them and timed under each in turn; MPS settings run in a child per SM share under our own daemon.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from understudy.errors import RestrictionError
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.settings import Settings
from understudy.workload import Workload
from engine import restrict, timing
from engine.mapping import mps_percentage


class Bench:
    def __init__(self, workload: Workload, host: HostInfo, settings: Settings, gpu_index: int = 0,
                 nvml: Any | None = None) -> None:
        self.workload = workload
        self.host = host
        self.settings = settings
        self.gpu_index = gpu_index
        self.nvml = nvml
        self._done: dict[tuple[Any, ...], Measurement] = {}
        self._mps: restrict.MpsDaemon | None = None
        self._timer: timing.StepTimer | None = None

    def measure(self, setting: HostSetting) -> Measurement:
        """The setting's measurement; its wall_s is what the setting cost, from applying its restrictions to releasing
        them (the first in-process setting builds the step, the first MPS setting starts the daemon)."""
        if setting.key not in self._done:
            started = time.perf_counter()
            measured = self._measure(setting)
            self._done[setting.key] = measured.model_copy(update={"wall_s": time.perf_counter() - started})
        return self._done[setting.key]

    def close(self) -> None:
        self._timer = None
        if self._mps is not None:
            self._mps.stop()
            self._mps = None

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _clock_reader(self) -> Callable[[], float] | None:
        if self.nvml is None:
            return None
        nvml, handle = self.nvml, self.nvml.nvmlDeviceGetHandleByIndex(self.gpu_index)
        return lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))

    def _measure(self, setting: HostSetting) -> Measurement:
        timing_args: dict[str, Any] = {"windows": self.settings.timed_windows, "window_ms": self.settings.window_ms,
                                       "profile": setting.profile, "cudnn_benchmark": self.settings.cudnn_benchmark}
        try:
            with ExitStack() as stack:
                if setting.clock_mode == "locked" and setting.clock_mhz is not None:
                    if self.nvml is None:
                        raise RestrictionError("a clock lock needs NVML")
                    handle = self.nvml.nvmlDeviceGetHandleByIndex(self.gpu_index)
                    stack.enter_context(restrict.clock_lock(self.nvml, handle, setting.clock_mhz))
                if setting.sm_mechanism == "mps" and setting.sm_count is not None:
                    return self._measure_mps(setting, timing_args)
                stack.enter_context(restrict.memory_cap(setting.memory_cap_gb, self.gpu_index))
                stream = None
                if setting.sm_mechanism == "green-context" and setting.sm_count is not None:
                    stream = stack.enter_context(restrict.green_context(setting.sm_count, self.gpu_index))
                if self._timer is None:
                    self._timer = timing.StepTimer(self.workload, self.gpu_index)
                return self._timer.time(stream, clock_reader=self._clock_reader(), **timing_args)
        except RestrictionError as exc:
            return Measurement(status="failed", error=str(exc))

    def _measure_mps(self, setting: HostSetting, timing_args: dict[str, Any]) -> Measurement:
        if self._mps is None:
            daemon = restrict.MpsDaemon(self.settings.mps_control)
            daemon.start()
            # Kept only once it runs: a daemon that failed to start must fail every MPS setting, not be skipped.
            self._mps = daemon
        percentage, _ = mps_percentage(setting.sm_count or 0, self.host.sm_count or 1)
        request = {"workload": self.workload.canonical(), "memory_cap_gb": setting.memory_cap_gb, **timing_args}
        result = restrict.run_mps_child(self._mps, percentage, request, self.settings.job_timeout_s, self.gpu_index)
        if result.observed_clock_mhz is None and (reader := self._clock_reader()) is not None:
            result = result.model_copy(update={"observed_clock_mhz": reader()})
        return result
