"""Timing one workload on the GPU as the paper does: graph capture on the (restricted) stream, min over windows.

Random inputs and labels live on the GPU; after a warm-up the step is captured in a CUDA graph on the stream it
will run on (a green context's stream restricts only what runs on it) and replayed in timed windows, each between
its own pair of events. The result keeps the minimum, median and spread of the per-step time; when capture fails
the step is timed eagerly with events and the result says so.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from understudy.results import Measurement
from understudy.workload import Workload

WARMUP_STEPS = 3
PROFILED_STEPS = 2

_TENSOR_KERNELS = ("nvjet", "xmma", "tensorop", "hmma", "flash", "fmha", "wgmma", "gemm", "cutlass", "sm90_",
                   "sm80_", "sm86_", "sm89_", "ampere_", "volta_", "turing_", "attention")
# "gemm_f32f32" is cuBLAS's plain-FP32 GEMM on Hopper (sm90_xmma_gemm_f32f32_...): FFMA on the plain lanes,
# despite "xmma" in its name; its TF32 twin is named "..._tf32f32_...".
_SIMT_KERNELS = ("depthwise", "sgemm", "convolve", "conv2d_c1_k1", "dgrad2d_c1", "wgrad2d_c1", "implicit_convolve",
                 "gemm_f32f32")


def kernel_class(name: str) -> str:
    """What limits a kernel, judged by its name: 'tensor' (tensor-core math), 'simt' (convolution on the plain
    lanes) or 'other' (normalisation, activations, copies, layout transforms, reductions, optimizer...)."""
    lowered = name.lower()
    if any(marker in lowered for marker in _SIMT_KERNELS):
        return "simt"
    if any(marker in lowered for marker in _TENSOR_KERNELS):
        return "tensor"
    return "other"


def measure(
    workload: Workload,
    device_index: int = 0,
    stream: Any | None = None,
    windows: int = 10,
    window_ms: float = 50.0,
    profile: bool = False,
    use_graph: bool = True,
    clock_reader: Any | None = None,
) -> Measurement:
    """Time one step of `workload` on `stream` (a side stream of the device when None). OOM is a result."""
    import torch

    from worker.workloads import make_step

    started = time.perf_counter()
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda", device_index)
    stream = stream or torch.cuda.Stream(device)
    torch.cuda.reset_peak_memory_stats(device)
    notes: list[str] = []
    try:
        with torch.cuda.stream(stream):
            step = make_step(workload, device, graph_safe=use_graph)
            for _ in range(WARMUP_STEPS):
                step.run()
            stream.synchronize()
            run = step.run
            mode = "eager"
            if use_graph:
                try:
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, stream=stream):
                        step.run()
                    graph.replay()
                    stream.synchronize()
                    run, mode = graph.replay, "graph"
                except Exception as exc:  # noqa: BLE001 - capture fails for some models; eager timing still holds
                    notes.append(f"graph capture failed, timed eagerly: {str(exc).splitlines()[0][:200]}")
                    torch.cuda.synchronize(device)
                    step = make_step(workload, device, graph_safe=False)
                    for _ in range(WARMUP_STEPS):
                        step.run()
                    run = step.run
            per_step, clock = _time_windows(run, stream, windows, window_ms, clock_reader)
            kernel_ms = _profile(step.run, stream) if profile else {}
    except torch.cuda.OutOfMemoryError as exc:
        del exc
        torch.cuda.empty_cache()
        return Measurement(status="oom", error="out of memory under this memory cap",
                           wall_s=time.perf_counter() - started)
    # Allocated, not reserved: the caching allocator's slack is not memory the target would need.
    peak_gb = torch.cuda.max_memory_allocated(device) / 1e9
    return Measurement(
        status="done",
        min_ms=min(per_step),
        median_ms=statistics.median(per_step),
        spread_ms=max(per_step) - min(per_step),
        windows=len(per_step),
        timing_mode=mode,  # type: ignore[arg-type]
        observed_clock_mhz=clock,
        peak_memory_gb=peak_gb,
        kernel_ms=kernel_ms,
        error="; ".join(notes) or None,
        wall_s=time.perf_counter() - started,
    )


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
