"""Timing one workload on the GPU as the paper does: graph capture on the (restricted) stream, min over windows.

A StepTimer builds the workload's step once (the timm model, random inputs and labels on the GPU) and times it under
one setting after another, each applied by the caller around `time()`: it warms the step up on that setting's
stream, captures a fresh CUDA graph there (a green context's stream restricts only what runs on it), replays it in
timed windows, each between its own pair of events, and drops the graph. The result keeps the minimum, median and
spread of the per-step time. When capture fails the step is rebuilt for eager timing and kept that way, and every
result timed eagerly says why. A compiled workload (`Workload.compile`) is compiled by its step's first call, made as
the step is built: its wall time is the result's `compile_s`, and every timed step runs the compiled code.
"""

from __future__ import annotations

import statistics
import time
import warnings
from typing import TYPE_CHECKING, Any

from understudy.results import Measurement
from understudy.workload import Workload

if TYPE_CHECKING:
    from engine.workloads import Step

WARMUP_STEPS = 3
PROFILED_STEPS = 2

_TENSOR_KERNELS = ("nvjet", "xmma", "tensorop", "hmma", "flash", "fmha", "wgmma", "gemm", "cutlass", "sm90_",
                   "sm80_", "sm86_", "sm89_", "ampere_", "volta_", "turing_", "attention")
# "gemm_f32f32" is cuBLAS's plain-FP32 GEMM on Hopper (sm90_xmma_gemm_f32f32_f32f32_...): FFMA on the plain lanes,
# despite "xmma" in its name. Its TF32 twins name "tf32" (sm90_xmma_gemm_f32f32_tf32f32_..., cuDNN's fp32
# convolutions ..._implicit_gemm_f32f32_tf32f32_...): tensor cores, whatever else the name holds.
_SIMT_KERNELS = ("depthwise", "sgemm", "convolve", "conv2d_c1_k1", "dgrad2d_c1", "wgrad2d_c1", "implicit_convolve",
                 "gemm_f32f32")


# Inductor's generated kernels for a compiled model's pointwise, reduction and persistent-reduction work. Their names
# carry the aten ops fused into them ("triton_poi_fused_convolution_relu_3" adds a convolution's bias), which must
# not read as the convolution or attention they came from.
_INDUCTOR_MEMORY_KERNELS = ("triton_poi_", "triton_red_", "triton_per_")


def kernel_class(name: str) -> str:
    """What limits a kernel, judged by its name: 'tensor' (tensor-core math), 'simt' (convolution on the plain
    lanes) or 'other' (normalisation, activations, copies, layout transforms, reductions, optimizer...)."""
    lowered = name.lower()
    if lowered.startswith(_INDUCTOR_MEMORY_KERNELS):
        return "other"
    if "tf32" in lowered:
        return "tensor"
    if any(marker in lowered for marker in _SIMT_KERNELS):
        return "simt"
    if any(marker in lowered for marker in _TENSOR_KERNELS):
        return "tensor"
    return "other"


def measure(workload: Workload, device_index: int = 0, windows: int = 10, window_ms: float = 50.0,
            profile: bool = False, cudnn_benchmark: bool = True) -> Measurement:
    """Build `workload`'s step and time it under the one setting this process runs in (the MPS child's way)."""
    return StepTimer(workload, device_index).time(windows=windows, window_ms=window_ms, profile=profile,
                                                  cudnn_benchmark=cudnn_benchmark)


class StepTimer:
    """One workload's step, built on first use and timed under one setting after another. OOM is a result."""

    def __init__(self, workload: Workload, device_index: int = 0) -> None:
        # Nothing touches CUDA before the first time(): a bench that only runs MPS children never needs it here.
        self.workload = workload
        self.device_index = device_index
        self.step: Step | None = None
        self._stream: Any | None = None
        self._eager_reason: str | None = None
        # The first build's compile: a rebuild for eager timing compiles again, mostly from inductor's caches.
        self._compile_s: float | None = None

    def time(self, stream: Any | None = None, windows: int = 10, window_ms: float = 50.0, profile: bool = False,
             clock_reader: Any | None = None, cudnn_benchmark: bool = True) -> Measurement:
        """Time one step on `stream` (the timer's own side stream when None), building the step first if need be."""
        import torch

        torch.backends.cudnn.benchmark = cudnn_benchmark
        # The allocator's per-device statistics exist only once CUDA is initialised, and on the whole GPU nothing
        # has initialised it yet ("Invalid device argument" on the H200 when no green context came first).
        if torch.cuda.is_available():
            torch.cuda.init()
        torch.cuda.reset_peak_memory_stats(self.device_index)
        measured: Measurement | None
        try:
            measured = self._time(stream, windows, window_ms, profile, clock_reader)
        except Exception as exc:
            if not _out_of_memory(exc):
                raise
            measured = None
        # Past the handler the failed step's frames, and the activations they held, are gone: now memory can go back.
        if measured is None:
            # It may have struck anywhere, capture included: the next setting starts from a fresh build.
            self.step = None
        # cuBLAS keeps a workspace per stream, and a green context's stream dies with its setting.
        torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
        return measured if measured is not None else Measurement(status="oom",
                                                                 error="out of memory under this memory cap")

    def _time(self, stream: Any | None, windows: int, window_ms: float, profile: bool,
              clock_reader: Any | None) -> Measurement:
        import torch

        if self.step is None:
            self.step = self._build(graph_safe=self._eager_reason is None)
        stream = stream or self._stream
        graph = None
        try:
            with torch.cuda.stream(stream):
                _warm_up(self.step.run, stream)
                run, mode = self.step.run, "eager"
                if self._eager_reason is None:
                    try:
                        graph = _capture(self.step.run, stream)
                        run, mode = graph.replay, "graph"
                    except Exception as exc:
                        if _out_of_memory(exc):
                            raise
                        first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
                        self._eager_reason = f"graph capture failed, timed eagerly: {first_line[:200]}"
                        torch.cuda.synchronize(self.device_index)
                        self.step = self._build(graph_safe=False)
                        _warm_up(self.step.run, stream)
                        run = self.step.run
                per_step, clock = _time_windows(run, stream, windows, window_ms, clock_reader)
                # An eager step's GPU time is its kernels' (Measurement.device_share), so it is always profiled.
                kernel_ms = _profile(self.step.run, stream) if profile or mode == "eager" else {}
        finally:
            if graph is not None:
                graph.reset()
        # Allocated, not reserved: the caching allocator's slack is not memory the target would need.
        peak_gb = torch.cuda.max_memory_allocated(self.device_index) / 1e9
        return Measurement(
            status="done",
            min_ms=min(per_step),
            median_ms=statistics.median(per_step),
            spread_ms=max(per_step) - min(per_step),
            windows=len(per_step),
            timing_mode=mode,
            observed_clock_mhz=clock,
            peak_memory_gb=peak_gb,
            kernel_ms=kernel_ms,
            error=self._eager_reason if mode == "eager" else None,
            compile_s=self._compile_s,
        )

    def _build(self, graph_safe: bool) -> Step:
        import torch

        from engine.workloads import make_step

        device = torch.device("cuda", self.device_index)
        if self._stream is None:
            self._stream = torch.cuda.Stream(device)
        # On the timer's own stream, not a setting's: the step outlives every setting and its stream.
        with torch.cuda.stream(self._stream):
            step = make_step(self.workload, device, graph_safe=graph_safe)
            if self.workload.compile:
                # torch.compile compiles on the first call; made here, so no warm-up or timed step pays for it.
                started = time.perf_counter()
                step.run()
                self._stream.synchronize()
                if self._compile_s is None:
                    self._compile_s = time.perf_counter() - started
        self._stream.synchronize()
        return step


def _out_of_memory(exc: BaseException) -> bool:
    """An OOM, or an error raised while unwinding from one (a capture ended by an OOM fails to end cleanly)."""
    import torch

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, torch.cuda.OutOfMemoryError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _warm_up(run: Any, stream: Any) -> None:
    for _ in range(WARMUP_STEPS):
        run()
    stream.synchronize()


def _capture(run: Any, stream: Any) -> Any:
    """A CUDA graph of one step, captured on `stream` and replayed once (a capture can succeed and its replay fail)."""
    import torch

    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            run()
        graph.replay()
        stream.synchronize()
    except BaseException:
        graph.reset()
        raise
    return graph


def _time_windows(
    run: Any, stream: Any, windows: int, window_ms: float, clock_reader: Any | None
) -> tuple[list[float], float | None]:
    import torch

    probe_start, probe_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_start.record(stream)
    run()
    probe_end.record(stream)
    probe_end.synchronize()
    reps = max(1, min(200, int(window_ms / max(probe_start.elapsed_time(probe_end), 1e-3))))
    events = []
    clock = None
    for index in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(reps):
            run()
        end.record(stream)
        events.append((start, end))
        if clock_reader is not None and index == windows // 2:
            # Read while the queued windows keep the GPU busy: the clock the time was measured at.
            clock = clock_reader()
    stream.synchronize()
    return [start.elapsed_time(end) / reps for start, end in events], clock


def _profile(run: Any, stream: Any) -> dict[str, float]:
    """Device milliseconds per step by kernel class, from an eager profiled step on the same stream."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        # "Profiler clears events at the end of each cycle": about profiling schedules, which one profiled window
        # does not use; it would otherwise reach every user's terminal and every worker's log.
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED_STEPS):
                run()
            stream.synchronize()
    totals = {"tensor": 0.0, "simt": 0.0, "other": 0.0}
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            totals[kernel_class(event.name)] += event.time_range.elapsed_us() / 1000.0
    del torch
    return {name: value / PROFILED_STEPS for name, value in totals.items()}


def warm_up_gpu(device_index: int = 0) -> None:
    """Pay, once per process, what the first measurement of any workload pays before its own work: the CUDA context,
    cuBLAS's and cuDNN's handles and kernels' modules for the usual precisions, and the profiler's start-up (kineto).
    A long-lived measuring process (worker.measuring) calls it before its first job."""
    import torch

    device = torch.device("cuda", device_index)
    torch.cuda.init()
    torch.backends.cudnn.benchmark = True
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a = torch.randn(256, 256, device=device, dtype=dtype, requires_grad=True)
        x = torch.randn(8, 16, 32, 32, device=device, dtype=dtype, requires_grad=True)
        w = torch.randn(16, 16, 3, 3, device=device, dtype=dtype, requires_grad=True)
        ((a @ a).sum() + torch.nn.functional.conv2d(x, w, padding=1).float().sum()).backward()
    torch.cuda.synchronize(device)
    _profile(lambda: a @ a, torch.cuda.current_stream(device))
    torch.cuda.empty_cache()
