"""Does cuDNN's algorithm search (`torch.backends.cudnn.benchmark_limit`, the algorithms tried per convolution)
set what a convolution network's first measurement costs? Each workload's first measurement is timed in fresh
processes, each with an empty CUDA compute cache of its own (CUDA_CACHE_PATH), at PyTorch's default limit (10) and
at 1, alternating, twice each; every line gives the measurement's seconds and the step it chose.

    source scripts/device_setup.sh && python3 benchmarks/cli/cudnn_limit.py > $OUT/cudnn-limit.jsonl   # GPU host
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

WORKLOADS = (
    {"model": "mobilenetv3_large_100", "mode": "train", "batch_size": 64},
    {"model": "convnext_tiny", "mode": "train", "batch_size": 64},
    {"model": "efficientnet_b0", "mode": "infer", "batch_size": 64},
    {"model": "resnet50", "mode": "train", "batch_size": 64},
)
LIMITS = ("default", "1", "default", "1")


def first_measurement(spec: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """Time one first measurement in this (fresh) process."""
    import torch

    from understudy.workload import Workload
    from engine.timing import measure

    if limit is not None:
        torch.backends.cudnn.benchmark_limit = limit
    began = time.perf_counter()
    measured = measure(Workload(**spec), windows=5, window_ms=10)
    return {"model": spec["model"], "mode": spec["mode"], "limit": torch.backends.cudnn.benchmark_limit,
            "measure_s": round(time.perf_counter() - began, 2), "median_ms": round(measured.median_ms or 0, 3),
            "status": measured.status}


def main() -> None:
    if len(sys.argv) > 1:  # a child: one workload at one limit
        print(json.dumps(first_measurement(json.loads(sys.argv[1]), None if sys.argv[2] == "default"
                                           else int(sys.argv[2]))), flush=True)
        return
    for spec in WORKLOADS:
        for limit in LIMITS:
            env = {**os.environ, "CUDA_CACHE_PATH": tempfile.mkdtemp()}
            out = subprocess.run([sys.executable, __file__, json.dumps(spec), limit], env=env,
                                 capture_output=True, text=True, timeout=200)
            print(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:], flush=True)


if __name__ == "__main__":
    main()
