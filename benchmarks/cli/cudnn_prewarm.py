"""Whether setting cuDNN up on several threads first shortens a workload's first measurement.

With its algorithm search on, cuDNN (v8 API) builds and times every candidate plan the first time a thread runs a
convolution of a given shape, and building some plans compiles kernels at run time: 10-25 s for a training step of a
network with many shapes (RegNet, MobileNet), one shape after another. The question: does running the step's
convolutions on a pool of threads first make the step's own first run cheap? PyTorch keeps cuDNN's choices per
thread, so only what outlives a thread (compiled kernels) can carry over.

Each run is a process of its own, with an empty driver compute cache of its own, that warms up as the worker's
measuring process does and then measures one workload as engine.timing.StepTimer does: with --threads 0 as the engine
does, with --threads N after running the step once with its convolutions skipped (which lists them) and then running
every listed convolution on N threads, each on a stream of its own. --no-search runs everything without the search.
It prints one JSON line: the seconds of each part, how many convolutions were listed, and the measured step.

    source scripts/device_setup.sh
    CUDA_CACHE_PATH=$(mktemp -d) python3 -m benchmarks.cli.cudnn_prewarm mobilenetv3_large_100 train 64 --threads 8

Results: results/prewarm-h100.jsonl (with the search), results/prewarm-nosearch-h200.jsonl (without); what they say:
README.md, "A number at once, measured answers after; a warm measuring process".
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

_CONVOLUTIONS = (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default)


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's layout without its values: enough to make one cuDNN treats the same."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    def make(self, device: torch.device) -> torch.Tensor:
        tensor = torch.empty_strided(self.size, self.stride, dtype=self.dtype, device=device)
        return tensor.normal_() if self.dtype.is_floating_point else tensor.zero_()


@dataclass(frozen=True)
class ConvolutionCall:
    """One convolution op of a step (forward or backward) with its arguments, tensors as their specs."""

    op: Any
    args: tuple[Any, ...]

    def run(self, device: torch.device) -> None:
        self.op(*tree_map(lambda a: a.make(device) if isinstance(a, TensorSpec) else a, self.args))


def _spec(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(value.size()), tuple(value.stride()), value.dtype)
    if isinstance(value, list):
        return tuple(_spec(v) for v in value)
    return value


def _blank(value: Any, device: torch.device | str) -> Any:
    """A tensor of `value`'s layout on `device`, its contents undefined; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=device)
    return value


class _Recorder(TorchDispatchMode):
    """Lists the convolutions a step runs and skips them: each returns zeros of its output's layout."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[ConvolutionCall, None] = {}  # ordered and without repeats

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's protocol
        if func not in _CONVOLUTIONS or kwargs:
            return func(*args, **(kwargs or {}))
        self.calls.setdefault(ConvolutionCall(func, tuple(_spec(a) for a in args)), None)
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        shapes = func(*tree_map(lambda a: _blank(a, "meta"), args))
        return tree_map(lambda t: _blank(t, device).zero_() if isinstance(t, torch.Tensor) else t, shapes)


def convolution_calls(run: Callable[[], Any]) -> list[ConvolutionCall]:
    """The distinct convolutions one call of `run` makes, found without running any of them."""
    with _Recorder() as recorder:
        run()
    return list(recorder.calls)


def prewarm(calls: list[ConvolutionCall], device: torch.device, threads: int) -> None:
    """Run each call once on one of `threads` threads, each with its own stream (dealt out round-robin)."""

    def run_share(share: list[ConvolutionCall]) -> None:
        torch.cuda.set_device(device)
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            for call in share:
                call.run(device)
        stream.synchronize()

    shares = [calls[i::threads] for i in range(min(threads, len(calls)))]
    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        list(pool.map(run_share, shares))
    torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("mode")
    parser.add_argument("batch", type=int)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-search", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    from engine.timing import StepTimer, warm_up_gpu
    from understudy.workload import Workload

    warm_up_gpu(0)
    search = not args.no_search
    report: dict[str, object] = {"model": args.model, "mode": args.mode, "batch": args.batch,
                                 "threads": args.threads, "search": search,
                                 "warm_up_s": round(time.perf_counter() - started, 2)}
    workload = Workload(model=args.model, mode=args.mode, batch_size=args.batch)
    began = time.perf_counter()
    timer = StepTimer(workload)
    if args.threads:
        torch.backends.cudnn.benchmark = search
        timer.step = timer._build(graph_safe=True)
        report["build_s"] = round(time.perf_counter() - began, 2)
        t = time.perf_counter()
        with torch.cuda.stream(timer._stream):
            calls = convolution_calls(timer.step.run)
        torch.cuda.synchronize()
        report["record_s"] = round(time.perf_counter() - t, 2)
        report["convolutions"] = len(calls)
        t = time.perf_counter()
        prewarm(calls, torch.device("cuda", 0), args.threads)
        report["prewarm_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    measured = timer.time(cudnn_benchmark=search)
    report["time_s"] = round(time.perf_counter() - t, 2)
    report["measurement_s"] = round(time.perf_counter() - began, 2)
    report.update(status=measured.status, min_ms=measured.min_ms and round(measured.min_ms, 3),
                  median_ms=measured.median_ms and round(measured.median_ms, 3), timing_mode=measured.timing_mode)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
