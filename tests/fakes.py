"""Stand-ins for the GPU's outside world, so the engine's restriction handling can be tested on a CPU machine.

- FakeNvml: the pynvml functions the probe, the bench and the restrictions call, recording every call and the
  current clock lock.
- FakeMpsControl: an executable written into a test's folder that plays nvidia-cuda-mps-control, appending its
  arguments, stdin and MPS folders to a log.
- write_fake_python: an executable that plays the MPS child (`python -m engine.mps_child`): prints a
  Measurement, sleeps past its timeout with a grandchild in its process group, or crashes.
- RestrictionRecorder: green_context and memory_cap replacements (they need CUDA) that record enter and exit.
- FakeTimer: engine.timing.StepTimer's stand-in, for what the bench passes to the timing.
- FakeCuda: torch.cuda as the timing uses it (streams, events, CUDA graphs, the allocator) and a fake step, for the
  timing itself: what it builds, captures and frees.
"""

from __future__ import annotations

import json
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from understudy.errors import RestrictionError
from understudy.results import HostInfo, Measurement
from understudy.settings import Settings

# The interpreter the fake programs run under, taken before any test puts a fake in sys.executable's place.
PYTHON = sys.executable

# The H200 the engine was measured on: 132 SMs, 141 GB, graphics clocks from 345 to 1980 MHz in 15 MHz steps.
H200_CLOCKS_MHZ = [float(mhz) for mhz in range(345, 1981, 15)]


def make_settings(**overrides: Any) -> Settings:
    """Settings with fields set by name (Settings itself only takes the environment variables' names), starting
    from what a test expects whatever the environment says: no clock lock, green contexts."""
    base = Settings().model_copy(
        update={"allow_clock_lock": False, "sm_mechanism": "green-context", "timed_windows": 3, "window_ms": 5.0}
    )
    return base.model_copy(update=overrides)


def h200_host(**overrides: Any) -> HostInfo:
    """The host description the probe gives on the H200."""
    fields: dict[str, Any] = {
        "gpu_name": "NVIDIA H200",
        "gpu_count": 1,
        "sm_count": 132,
        "compute_capability": "9.0",
        "max_sm_clock_mhz": 1980.0,
        "current_sm_clock_mhz": 1980.0,
        "supported_clocks_mhz": H200_CLOCKS_MHZ,
        "memory_gb": 141.0,
        "fingerprint": "fake-h200",
    }
    fields.update(overrides)
    return HostInfo(**fields)


def done_measurement(**overrides: Any) -> Measurement:
    """A successful measurement as engine.timing returns it."""
    fields: dict[str, Any] = {
        "status": "done",
        "min_ms": 10.0,
        "median_ms": 10.5,
        "spread_ms": 1.0,
        "windows": 10,
        "timing_mode": "graph",
        "observed_clock_mhz": None,
        "peak_memory_gb": 2.0,
        "kernel_ms": {"tensor": 6.0, "simt": 1.0, "other": 3.0},
    }
    fields.update(overrides)
    return Measurement(**fields)


class FakeNvmlError(Exception):
    """What the fake raises where pynvml would raise NVMLError."""


class FakeNvml:
    """pynvml as far as the engine uses it, for one GPU. `events` lists ('lock', mhz) and ('reset',) in order."""

    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(
        self,
        name: str = "NVIDIA H200",
        supported_clocks_mhz: list[float] | None = None,
        max_clock_mhz: int = 1980,
        idle_clock_mhz: int = 1755,
        memory_gb: float = 141.0,
        compute_capability: tuple[int, int] = (9, 0),
        driver: str = "580.00",
        refuse_lock: bool = False,
        locked_mhz: int | None = None,
        uuid: str = "GPU-00000000-fake-h200",
    ) -> None:
        self.name = name
        self.uuid = uuid
        self.supported = [int(c) for c in (supported_clocks_mhz or H200_CLOCKS_MHZ)]
        self.max_clock_mhz = max_clock_mhz
        self.idle_clock_mhz = idle_clock_mhz
        self.memory_gb = memory_gb
        self.compute_capability = compute_capability
        self.driver = driver
        self.refuse_lock = refuse_lock
        self.locked_mhz = locked_mhz  # a lock held now (set at construction: one a crashed run left behind)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.events: list[tuple[Any, ...]] = []

    def _record(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    def _check(self, handle: Any) -> None:
        if handle != ("gpu", 0):
            raise FakeNvmlError(f"not a handle of this fake: {handle!r}")

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self._record("nvmlInit")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._record("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._record("nvmlDeviceGetCount")
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[str, int]:  # noqa: N802
        self._record("nvmlDeviceGetHandleByIndex", index)
        if index != 0:
            raise FakeNvmlError(f"no GPU {index}")
        return ("gpu", index)

    def nvmlDeviceGetName(self, handle: Any) -> bytes:  # noqa: N802
        self._check(handle)
        return self.name.encode()  # older pynvml returns bytes; the probe takes both

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return self.driver

    def nvmlDeviceGetUUID(self, handle: Any) -> str:  # noqa: N802
        self._check(handle)
        return self.uuid

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:  # noqa: N802
        self._check(handle)
        return self.compute_capability

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> SimpleNamespace:  # noqa: N802
        self._check(handle)
        total = int(self.memory_gb * 1e9)
        return SimpleNamespace(total=total, free=total, used=0)

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, clock_type: int) -> int:  # noqa: N802
        self._check(handle)
        return self.max_clock_mhz

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:  # noqa: N802
        self._check(handle)
        self._record("nvmlDeviceGetClockInfo", handle, clock_type)
        if clock_type != self.NVML_CLOCK_SM:
            raise FakeNvmlError("the fake only knows the SM clock")
        return self.locked_mhz if self.locked_mhz is not None else self.idle_clock_mhz

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> list[int]:  # noqa: N802
        self._check(handle)
        return [2619, 1593]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, memory_clock_mhz: int) -> list[int]:  # noqa: N802
        self._check(handle)
        # Each memory clock lists part of the range, so the probe has to merge them.
        return self.supported[::-1] if memory_clock_mhz == 2619 else self.supported[: len(self.supported) // 2]

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, min_mhz: int, max_mhz: int) -> None:  # noqa: N802
        self._check(handle)
        self._record("nvmlDeviceSetGpuLockedClocks", handle, min_mhz, max_mhz)
        if not isinstance(min_mhz, int) or not isinstance(max_mhz, int):
            raise FakeNvmlError("pynvml takes whole MHz")
        if self.refuse_lock:
            raise FakeNvmlError("Insufficient Permissions")
        if min_mhz != max_mhz or min_mhz not in self.supported:
            raise FakeNvmlError(f"{min_mhz}-{max_mhz} MHz is not a supported lock")
        self.locked_mhz = min_mhz
        self.events.append(("lock", min_mhz))

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:  # noqa: N802
        self._check(handle)
        self._record("nvmlDeviceResetGpuLockedClocks", handle)
        self.locked_mhz = None
        self.events.append(("reset",))

    def called(self, name: str) -> int:
        """How many times a pynvml function was called."""
        return sum(1 for call, _ in self.calls if call == name)


class FakeMpsControl:
    """An executable that plays nvidia-cuda-mps-control: `-d` starts, stdin 'quit' stops; every call is logged."""

    def __init__(self, directory: Path, refuse_start: bool = False) -> None:
        self.path = directory / "fake-mps-control"
        self.log = directory / "fake-mps-control.log"
        script = f"""#!{PYTHON}
import json, os, sys
argv = sys.argv[1:]
stdin = "" if "-d" in argv else sys.stdin.read()
entry = {{"argv": argv, "stdin": stdin, "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
         "log": os.environ.get("CUDA_MPS_LOG_DIRECTORY")}}
with open({str(self.log)!r}, "a") as f:
    f.write(json.dumps(entry) + "\\n")
if {refuse_start!r} and "-d" in argv:
    sys.stderr.write("fake: An instance of this daemon is already running\\n")
    sys.exit(1)
"""
        _write_executable(self.path, script)

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def commands(self) -> list[str]:
        """'start' for `-d`, otherwise what was written to stdin ('quit')."""
        return ["start" if "-d" in e["argv"] else e["stdin"].strip() for e in self.entries()]


def write_fake_python(directory: Path, behaviour: str, measurement: Measurement | None = None) -> Path:
    """An executable to put in sys.executable's place for `python -m engine.mps_child`.

    behaviour: 'measure' prints `measurement` as the child would; 'hang' starts a grandchild in its process group,
    writes the grandchild's pid to grandchild.pid and sleeps; 'crash' writes to stderr and exits 3.
    Every call logs its argv, the request it read, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and the parent pid it was given
    to child.log.
    """
    path = directory / f"fake-python-{behaviour}"
    payload = (measurement or done_measurement()).model_dump_json()
    script = f"""#!{PYTHON}
import json, os, subprocess, sys, time
request = json.loads(sys.stdin.read())
entry = {{"argv": sys.argv[1:], "request": request,
         "percentage": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
         "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
         "parent": os.environ.get("UNDERSTUDY_MPS_PARENT_PID")}}
with open({str(directory / "child.log")!r}, "a") as f:
    f.write(json.dumps(entry) + "\\n")
behaviour = {behaviour!r}
if behaviour == "measure":
    print("some library chatter")
    print({payload!r})
elif behaviour == "hang":
    grandchild = subprocess.Popen([{PYTHON!r}, "-c", "import time; time.sleep(120)"])
    with open({str(directory / "grandchild.pid")!r}, "w") as f:
        f.write(str(grandchild.pid))
    time.sleep(120)
else:
    sys.stderr.write("Traceback (most recent call last):\\nRuntimeError: CUDA driver gave up\\n")
    sys.exit(3)
"""
    _write_executable(path, script)
    return path


def child_log(directory: Path) -> list[dict[str, Any]]:
    path = directory / "child.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class FakeStream(str):
    """A CUDA stream's stand-in: its name, and synchronize() with nothing to wait for."""

    def synchronize(self) -> None:
        pass


class RestrictionRecorder:
    """Replacements for engine.restrict.green_context and memory_cap that record ('enter'|'exit', what, value)."""

    def __init__(self, refuse_green_context: bool = False) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.refuse_green_context = refuse_green_context

    @contextmanager
    def green_context(self, num_sms: int, device_index: int = 0) -> Iterator[FakeStream]:
        if self.refuse_green_context:
            raise RestrictionError(f"could not create a green context of {num_sms} SMs: fake refusal")
        self.events.append(("enter", "green-context", num_sms))
        try:
            yield FakeStream(f"green-context-stream-{num_sms}")
        finally:
            self.events.append(("exit", "green-context", num_sms))

    @contextmanager
    def memory_cap(self, capacity_gb: float | None, device_index: int = 0) -> Iterator[None]:
        self.events.append(("enter", "memory-cap", capacity_gb))
        try:
            yield
        finally:
            self.events.append(("exit", "memory-cap", capacity_gb))

    def balanced(self) -> bool:
        """Every restriction entered was left again, innermost first."""
        stack: list[tuple[str, Any]] = []
        for kind, what, value in self.events:
            if kind == "enter":
                stack.append((what, value))
            elif not stack or stack.pop() != (what, value):
                return False
        return not stack


class FakeTimer:
    """A stand-in for engine.timing.StepTimer: each timer it makes (one per bench that times in-process) records what
    the bench passed to time() (and the clock the fake NVML held meanwhile), then returns `result` or raises `error`."""

    def __init__(self, result: Measurement | None = None, error: BaseException | None = None,
                 nvml: FakeNvml | None = None) -> None:
        self.result = result or done_measurement()
        self.error = error
        self.nvml = nvml
        self.timers: list[tuple[Any, int]] = []
        self.calls: list[dict[str, Any]] = []

    def __call__(self, workload: Any, device_index: int = 0) -> SimpleNamespace:
        self.timers.append((workload, device_index))

        def time(stream: Any | None = None, windows: int = 10, window_ms: float = 50.0, profile: bool = False,
                 clock_reader: Any | None = None, cudnn_benchmark: bool = True) -> Measurement:
            self.calls.append({
                "workload": workload, "device_index": device_index, "stream": stream, "windows": windows,
                "window_ms": window_ms, "profile": profile, "cudnn_benchmark": cudnn_benchmark,
                "clock_read": clock_reader() if clock_reader is not None else None,
                "locked_mhz": self.nvml.locked_mhz if self.nvml is not None else None,
            })
            if self.error is not None:
                raise self.error
            return self.result

        return SimpleNamespace(time=time)


class FakeCuda:
    """torch.cuda as engine.timing uses it, on a CPU, with engine.workloads.make_step replaced by a step that does
    nothing. `events` lists, in order: ('build', graph_safe), ('capture', stream), ('capture refused', stream),
    ('profile', stream), ('graph reset', stream) and ('empty cache',).

    A step run on a stream in `oom_streams` raises torch.cuda.OutOfMemoryError; on a stream in `oom_in_capture`
    only while captured, and the capture then fails to end, as a real one does. With `refuse_capture` every
    capture fails, as for a model that cannot be captured. Building a step takes `build_s` seconds, and a step's first
    call `first_call_s` more (what torch.compile spends compiling a compiled workload's step). `runs` counts the calls
    of every step built.
    """

    def __init__(self, oom_streams: tuple[str, ...] = (), oom_in_capture: tuple[str, ...] = (),
                 refuse_capture: bool = False, build_s: float = 0.0, first_call_s: float = 0.0) -> None:
        self.oom_streams = oom_streams
        self.oom_in_capture = oom_in_capture
        self.refuse_capture = refuse_capture
        self.build_s = build_s
        self.first_call_s = first_call_s
        self.runs = 0
        self.events: list[tuple[Any, ...]] = []
        self.current = FakeStream("default")
        self.capturing: str | None = None
        self.side_streams = 0

    def install(self, monkeypatch: Any) -> FakeCuda:
        import torch

        cuda = torch.cuda
        monkeypatch.setattr(cuda, "Stream", self._new_stream)
        monkeypatch.setattr(cuda, "stream", self._on_stream)
        monkeypatch.setattr(cuda, "Event", _FakeEvent)
        monkeypatch.setattr(cuda, "CUDAGraph", lambda: _FakeGraph(self))
        monkeypatch.setattr(cuda, "graph", self._capture)
        monkeypatch.setattr(cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(cuda, "empty_cache", lambda: self.events.append(("empty cache",)))
        monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda device=None: None)
        monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: 2e9)
        monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: None, raising=False)
        monkeypatch.setattr("engine.workloads.make_step", self._make_step)
        monkeypatch.setattr("engine.timing._profile", self._profile)
        return self

    def _profile(self, run: Any, stream: FakeStream) -> dict[str, float]:
        """torch.profiler's split of one step's device time, which needs a GPU: one step run, 1 ms of kernels."""
        self.events.append(("profile", stream))
        run()
        return {"tensor": 0.0, "simt": 0.0, "other": 1.0}

    def builds(self) -> list[bool]:
        """graph_safe of each step built, in order."""
        return [event[1] for event in self.events if event[0] == "build"]

    def captures(self) -> list[str]:
        """The stream of each CUDA graph captured, in order."""
        return [event[1] for event in self.events if event[0] == "capture"]

    def resets(self) -> list[str]:
        return [event[1] for event in self.events if event[0] == "graph reset"]

    def _new_stream(self, device: Any = None) -> FakeStream:
        self.side_streams += 1
        return FakeStream(f"side-stream-{self.side_streams}")

    @contextmanager
    def _on_stream(self, stream: FakeStream) -> Iterator[None]:
        previous, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = previous

    @contextmanager
    def _capture(self, graph: _FakeGraph, stream: FakeStream) -> Iterator[None]:
        graph.stream = stream
        if self.refuse_capture:
            self.events.append(("capture refused", stream))
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        previous, self.current, self.capturing = self.current, stream, stream
        try:
            yield
        except BaseException as exc:
            # Raised while the step's error unwinds, so it carries that error as its cause, as torch's does.
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from exc
        finally:
            self.current, self.capturing = previous, None
        self.events.append(("capture", stream))

    def _make_step(self, workload: Any, device: Any, graph_safe: bool = False) -> Any:
        import torch

        from engine.workloads import Step

        time.sleep(self.build_s)
        self.events.append(("build", graph_safe))
        calls = 0

        def run() -> None:
            nonlocal calls
            calls += 1
            self.runs += 1
            if calls == 1:
                time.sleep(self.first_call_s)
            if self.current in self.oom_streams or (self.capturing is not None
                                                    and self.capturing in self.oom_in_capture):
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")

        return Step(torch.nn.Identity(), run)


class _FakeGraph:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.stream: str | None = None

    def replay(self) -> None:
        pass

    def reset(self) -> None:
        self.cuda.events.append(("graph reset", self.stream))


class _FakeEvent:
    """A timing event whose every interval lasts 1 ms."""

    def __init__(self, enable_timing: bool = False) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 1.0
