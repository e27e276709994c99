"""Check on a GPU that autocast's fp32-output ops launch the kernels the meta-device trace counts for them
(engine/counting.py: _fp32_output, and the scans it traces with their cast): for each op and 16-bit type, the CUDA
kernels torch.profiler sees one call of it launch under torch.autocast, beside the memory ops the trace counts for
the same call. One JSON line per case.

    source scripts/device_setup.sh && python3 benchmarks/accuracy/autocast_kernels.py > $OUT/autocast-kernels.jsonl

A case matches when the GPU launches as many kernels as the trace counts ops (a cast the trace counts and the GPU
fuses, or the other way round, shows as one kernel more on one side).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.counting import _Autocast, _CountingMode

Op = Callable[[torch.Tensor], torch.Tensor]
CASES: dict[str, tuple[tuple[int, ...], Op]] = {
    "softmax": ((8, 4, 64, 64), lambda x: x.softmax(dim=-1)),
    "log_softmax": ((64, 1000), lambda x: F.log_softmax(x, dim=-1)),
    "sum": ((8, 96, 56, 56), lambda x: x.sum(dim=(2, 3))),
    "prod": ((8, 96, 56, 56), lambda x: x.prod(dim=-1)),
    "cumsum": ((8, 4096), lambda x: x.cumsum(dim=-1)),
    "cumprod": ((8, 4096), lambda x: x.cumprod(dim=-1)),
    "norm": ((8, 14, 14, 96), lambda x: x.norm(p=2, dim=(1, 2), keepdim=True)),
    "normalize": ((8, 96, 196), lambda x: F.normalize(x, dim=-1)),
}


def gpu_kernels(shape: tuple[int, ...], op: Op, dtype: torch.dtype) -> tuple[list[str], str]:
    """The CUDA kernels one call of `op` launches under CUDA's autocast, and its output's dtype."""
    x = torch.randn(shape, device="cuda").to(dtype)
    with torch.autocast("cuda", dtype=dtype):
        op(x)  # first call outside the profile: no one-time set-up in the listing
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = op(x)
            torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return kernels, str(out.dtype)


def traced(shape: tuple[int, ...], op: Op, dtype: torch.dtype) -> tuple[list[tuple[str, float, float]], str]:
    """The ops the meta-device trace counts for one call of `op`, and its output's dtype."""
    x = torch.empty(shape, dtype=dtype, device="meta")
    mode = _CountingMode()
    with _Autocast(dtype), mode:
        out = op(x)
    return mode.ops, str(out.dtype)


def main() -> None:
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}), flush=True)
    for name, (shape, op) in CASES.items():
        for dtype in (torch.float16, torch.bfloat16):
            kernels, gpu_dtype = gpu_kernels(shape, op, dtype)
            ops, trace_dtype = traced(shape, op, dtype)
            print(json.dumps({"op": name, "dtype": str(dtype), "shape": shape, "gpu_kernels": kernels,
                              "gpu_out": gpu_dtype, "trace_ops": ops, "trace_out": trace_dtype,
                              "match": len(kernels) == len(ops) and gpu_dtype == trace_dtype}), flush=True)


if __name__ == "__main__":
    main()
