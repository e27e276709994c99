"""Time small FL training steps the way an FL client runs them: eagerly, one step after another, each ending in
`loss.item()` (every framework's client loop reads the loss), on the GPU host. Writes one JSON line per workload
with the wall-clock step time, the GPU's kernel time for one step and how many kernels it launched, so the
traces' wall-clock step time (kernels plus what launching them costs) can be checked anywhere afterwards.

    python3 benchmarks/fl/small_steps.py --out small-steps.jsonl        # on the GPU host
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.workload import Workload

# (model, batch, resolution): FL benchmarks' client workloads (CIFAR-sized and downscaled ImageNet-sized images,
# FedScale's and FLGo's usual batch sizes), fp32 as FL frameworks train.
WORKLOADS = (
    ("resnet18", 20, 32), ("resnet18", 32, 32), ("resnet18", 20, 64), ("resnet34", 20, 32),
    ("resnet50", 20, 64), ("mobilenetv2_100", 20, 32), ("mobilenetv3_small_100", 20, 64),
    ("efficientnet_b0", 20, 32), ("regnetx_002", 32, 32), ("densenet121", 20, 32), ("convnext_nano", 20, 32),
    ("vit_tiny_patch16_224", 20, 224), ("resnet18", 20, 224), ("mobilenetv2_100", 32, 224),
)
STEPS = 30


def time_one(model: str, batch: int, resolution: int) -> dict[str, object]:
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from engine.workloads import make_step

    torch.backends.cudnn.benchmark = True
    workload = Workload(model=model, mode="train", batch_size=batch, resolution=resolution, precision="fp32",
                        optimizer="sgd")
    step = make_step(workload, torch.device("cuda"))
    for _ in range(10):
        step.run().item()
    walls = []
    for _ in range(STEPS):
        started = time.perf_counter()
        step.run().item()
        walls.append((time.perf_counter() - started) * 1e3)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step.run().item()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    return {"workload": workload.canonical(), "wall_ms_median": statistics.median(walls), "wall_ms_min": min(walls),
            "kernel_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1e3, "kernels": len(kernels),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with args.out.open("a") as out:
        for model, batch, resolution in WORKLOADS:
            try:
                record = time_one(model, batch, resolution)
            except Exception as exc:  # noqa: BLE001 - one workload's failure is its line, the rest still run
                record = {"workload": {"model": model, "batch_size": batch, "resolution": resolution},
                          "error": str(exc)[:300]}
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(json.dumps(record)[:200])


if __name__ == "__main__":
    main()
