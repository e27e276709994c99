"""Which ops make a workload's first step slow on a fresh GPU host: one step profiled (CPU side), then a second.

    CUDA_CACHE_PATH=$(mktemp -d) python3 -m benchmarks.cli.first_step_ops convnext_tiny train 64 [--search] [--no-cudnn]

--no-cudnn runs the step on PyTorch's own convolution kernels: what the first step costs when no cuDNN plan is built.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    model, mode, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    started = time.perf_counter()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from engine.workloads import make_step
    from understudy.workload import Workload

    torch.backends.cudnn.benchmark = "--search" in sys.argv
    torch.backends.cudnn.enabled = "--no-cudnn" not in sys.argv
    workload = Workload(model=model, mode=mode, batch_size=batch)  # type: ignore[arg-type]
    torch.cuda.init()
    print(f"{model} {mode} {batch}: cuDNN {torch.backends.cudnn.version() if torch.backends.cudnn.enabled else 'off'}",
          flush=True)
    print(f"imports and CUDA init {time.perf_counter() - started:.2f} s", flush=True)
    t = time.perf_counter()
    step = make_step(workload, torch.device("cuda", 0), graph_safe=True)
    torch.cuda.synchronize()
    print(f"build {time.perf_counter() - t:.2f} s", flush=True)
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step.run()
        torch.cuda.synchronize()
    print(f"first step {time.perf_counter() - t:.2f} s (profiled)", flush=True)
    for attempt in range(2):
        t = time.perf_counter()
        step.run()
        torch.cuda.synchronize()
        print(f"step {attempt + 2} {time.perf_counter() - t:.3f} s", flush=True)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
    cache = Path(os.environ.get("CUDA_CACHE_PATH", Path.home() / ".nv" / "ComputeCache"))
    files = [p for p in cache.rglob("*") if p.is_file()]
    print(f"driver compute cache {cache}: {len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
