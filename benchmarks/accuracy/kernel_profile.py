"""Where a step's device time goes, kernel by kernel, beside what the meta-device counts say of it (run on a GPU).

For each workload given as MODEL:MODE:BATCH:PRECISION:FORMAT, profiles a few eager steps and writes one JSON line:
the device milliseconds per step of every kernel name (summed over its launches, with their number), per kernel
class (engine.timing.kernel_class), and the counted FLOPs and bytes per op kind. It is how the roofline's per-kind
prices are checked against what a GPU runs, e.g. why the H200's channels-last training takes far less than its
counts price (benchmarks/accuracy/README.md).

    python3 benchmarks/accuracy/kernel_profile.py resnet50:train:64:amp-fp16:nhwc ... --out profile.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.workload import Workload
from engine.counting import count_workload
from engine.timing import kernel_class
from engine.workloads import make_step

STEPS = 3


def parse(text: str) -> Workload:
    model, mode, batch, precision, memory_format = text.split(":")
    return Workload(model=model, mode=mode, batch_size=int(batch), precision=precision, memory_format=memory_format,
                    optimizer="sgd" if mode == "train" else "none")


def profiled(workload: Workload) -> dict:
    torch.backends.cudnn.benchmark = True
    step = make_step(workload, "cuda")
    for _ in range(5):
        step.run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step.run()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    classes = {"tensor": 0.0, "simt": 0.0, "other": 0.0}
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            ms = event.time_range.elapsed_us() / 1000.0 / STEPS
            kernels[event.name][0] += ms
            kernels[event.name][1] += 1
            classes[kernel_class(event.name)] += ms
    del step
    torch.cuda.empty_cache()
    top = sorted(kernels.items(), key=lambda item: -item[1][0])
    return {"classes_ms": classes, "kernels": [[name[:160], round(ms, 4), n // STEPS] for name, (ms, n) in top]}


def counted(workload: Workload) -> dict:
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for kind, flops, moved in count_workload(workload).ops:
        totals[kind][0] += flops
        totals[kind][1] += moved
        totals[kind][2] += 1
    return {kind: {"gflop": round(f / 1e9, 3), "mb": round(m / 1e6, 2), "ops": n} for kind, (f, m, n) in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with args.out.open("a") as out:
        for text in args.workloads:
            workload = parse(text)
            try:
                record = {"workload": text, **profiled(workload), "counts": counted(workload)}
            except Exception as exc:  # noqa: BLE001 - one workload's failure is reported, the rest still run
                record = {"workload": text, "error": repr(exc)[:300]}
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(text, record.get("classes_ms", record.get("error")), flush=True)


if __name__ == "__main__":
    main()
