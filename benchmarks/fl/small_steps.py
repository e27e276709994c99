"""Time small FL training steps the way an FL client runs them: eagerly, one step after another, each ending in
`loss.item()` (every framework's client loop reads the loss), on the GPU host.

The step is launch-bound (the CPU issuing it, not the GPU running it, sets its pace), and a shared host's CPU speed
drifts, so one pass over the workloads measures the drift as much as the workloads. Every workload is therefore
built first and then visited in ROUNDS round-robin passes (each pass starting one workload later), a few warm-up
steps and TIMED_STEPS timed steps a visit: drift reaches all workloads alike, and the median over the rounds of each
visit's median is the workload's step, with the rounds' spread beside it. Building the twenty takes most of a call
(180 s on the H200 host: cuDNN's benchmark chooses every convolution's algorithms in the first step), so no round
starts that would leave the profiles no room before --budget-s: a 300 s call with --budget-s 250 gets about three
rounds. Each timed step also reads the host clock
between its phases (forward, backward, optimizer, the final `loss.item()` wait), which shows where its time goes.
Intra-op CPU threads are pinned to one (torch.set_num_threads(1)), as Ray, which runs Flower's simulated clients,
sets OMP_NUM_THREADS=1 for its workers; an FL client's CPU is a share of a host's.

Last, one profiled step per workload gives the GPU's kernel time and kernel count of a step and the aten ops the CPU
dispatched in each phase. Writes one JSON line per workload, so the traces' wall-clock step time can be checked
anywhere afterwards (benchmarks/fl/wall_clock.py).

    python3 benchmarks/fl/small_steps.py --out small-steps.jsonl        # on the GPU host
    python3 benchmarks/fl/small_steps.py --out /tmp/s.jsonl --device cpu --rounds 1 --steps 2   # checks the script
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from understudy.workload import Workload

# (model, batch, resolution): FL benchmarks' client workloads (CIFAR-sized and downscaled ImageNet-sized images,
# FedScale's and FLGo's usual batch sizes), fp32 as FL frameworks train. The first fourteen are the earlier runs'.
WORKLOADS = (
    ("resnet18", 20, 32), ("resnet18", 32, 32), ("resnet18", 20, 64), ("resnet34", 20, 32),
    ("resnet50", 20, 64), ("mobilenetv2_100", 20, 32), ("mobilenetv3_small_100", 20, 64),
    ("efficientnet_b0", 20, 32), ("regnetx_002", 32, 32), ("densenet121", 20, 32), ("convnext_nano", 20, 32),
    ("vit_tiny_patch16_224", 20, 224), ("resnet18", 20, 224), ("mobilenetv2_100", 32, 224),
    ("shufflenet_v2_x1_0", 20, 32), ("squeezenet1_1", 20, 64), ("mobilenetv3_large_100", 20, 32),
    ("lcnet_050", 32, 32), ("resnet34", 32, 224), ("efficientnet_b0", 20, 128),
)
ROUNDS = 5
TIMED_STEPS = 30
# Steps before a visit's timed ones: the first builds cuDNN's plans; later visits refill caches other workloads used.
FIRST_WARMUP_STEPS = 10
WARMUP_STEPS = 5
PHASES = ("forward", "backward", "optimizer", "sync")


class Client:
    """One workload's training step as engine.workloads.make_step runs it (zero_grad, forward, cross-entropy,
    backward, optimizer step), split into its phases so that each can be timed and profiled apart."""

    def __init__(self, workload: Workload, device: torch.device) -> None:
        from engine.workloads import build_model, make_inputs, make_optimizer

        if workload.precision != "fp32":
            raise ValueError("an FL client's step here is fp32: no autocast")
        self.workload = workload
        self.model = build_model(workload, device)
        self.x, self.y = make_inputs(workload, device)
        optimizer = make_optimizer(workload, self.model.parameters())
        if optimizer is None:
            raise ValueError("a training step needs an optimizer")
        self.optimizer = optimizer
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def forward(self) -> torch.Tensor:
        self.optimizer.zero_grad()
        return self.loss_fn(self.model(self.x), self.y)

    def step(self) -> list[float]:
        """One step, and the host's time in each of PHASES (ms)."""
        started = time.perf_counter()
        loss = self.forward()
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        self.optimizer.step()
        stepped = time.perf_counter()
        loss.item()
        done = time.perf_counter()
        return [(b - a) * 1e3 for a, b in ((started, forward), (forward, backward), (backward, stepped),
                                           (stepped, done))]

    def visit(self, warmup: int, steps: int) -> dict[str, Any]:
        """`warmup` steps, then the medians of `steps` timed ones: the whole step and each phase (ms)."""
        for _ in range(warmup):
            self.step()
        phases = [self.step() for _ in range(steps)]
        walls = [sum(p) for p in phases]
        visit: dict[str, Any] = {"wall_ms": statistics.median(walls), "wall_ms_min": min(walls)}
        visit.update({f"{name}_ms": statistics.median(p[i] for p in phases) for i, name in enumerate(PHASES)})
        return visit

    def profile(self) -> dict[str, Any]:
        """One profiled step: the GPU's kernels (count, summed time, and each one's time in the order the GPU ran
        them) and, per phase, the aten ops the CPU dispatched (all, and those not called from another aten op), the
        autograd nodes it ran and the work it put on the GPU's stream (kernel launches, memsets, copies). One
        stream runs the step, so the GPU runs its work in the order it was put there: the first launches' count of
        kernels belongs to the forward, and so on."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.x.is_cuda else [])
        with profile(activities=activities) as prof:
            with record_function("fl::forward"):
                loss = self.forward()
            with record_function("fl::backward"):
                loss.backward()
            with record_function("fl::optimizer"):
                self.optimizer.step()
            with record_function("fl::sync"):
                loss.item()
        events = prof.events()
        # The profiler mirrors each marker onto the GPU's timeline as a span over the kernels it launched: those
        # spans are no kernels, and a phase's window is its marker's CPU range.
        kernels = sorted((e for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith("fl::")),
                         key=lambda e: e.time_range.start)
        windows = {e.name.removeprefix("fl::"): e.time_range for e in events
                   if e.device_type == DeviceType.CPU and e.name.startswith("fl::")}
        counts: Counter[str] = Counter()
        for event in events:
            if event.device_type != DeviceType.CPU or event.name.startswith("fl::"):
                continue
            phase = next((name for name, window in windows.items()
                          if window.start <= event.time_range.start <= window.end), "other")
            if event.name.startswith("aten::"):
                counts[f"{phase}_aten"] += 1
                if not _under_aten(event):
                    counts[f"{phase}_aten_top"] += 1
            elif event.name.startswith("autograd::engine::evaluate_function"):
                counts[f"{phase}_autograd_nodes"] += 1
            elif event.name.startswith(_STREAM_WORK):
                counts[f"{phase}_stream_work"] += 1
        return {"kernel_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1e3, "kernels": len(kernels),
                "kernel_us": [round(e.time_range.elapsed_us(), 1) for e in kernels],
                "cpu_counts": dict(sorted(counts.items()))}


# The CUDA runtime and driver calls that put work on a stream (what the profiler shows as the GPU's events).
_STREAM_WORK = ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync", "cudaLaunchCooperative")


def _under_aten(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def _sm_clock_mhz() -> int | None:
    """The GPU's SM clock now: a launch-bound step leaves the GPU idle enough to clock down."""
    try:
        return int(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - NVML missing or refused: the clock is a note, not a result
        return None


def _host_probe_us() -> float:
    """The host CPU's speed now: the median time (us) of a tiny CPU op's dispatch, over 200 batches of 10."""
    tensor = torch.zeros(1)
    times = []
    for _ in range(200):
        started = time.perf_counter()
        for _ in range(10):
            tensor.add_(1)
        times.append((time.perf_counter() - started) * 1e5)
    return statistics.median(times)


def _workload(model: str, batch: int, resolution: int) -> Workload:
    return Workload(model=model, mode="train", batch_size=batch, resolution=resolution, precision="fp32",
                    optimizer="sgd")


def measure(device: torch.device, rounds: int, steps: int, budget_s: float) -> list[dict[str, Any]]:
    """Build every workload, visit them in `rounds` round-robin passes (fewer where the next pass would end past
    `budget_s`), profile each; one record per workload."""
    began = time.monotonic()
    clients: dict[int, Client] = {}
    records: list[dict[str, Any]] = []
    probes: list[float] = []
    for i, (model, batch, resolution) in enumerate(WORKLOADS):
        workload = _workload(model, batch, resolution)
        records.append({"workload": workload.canonical(), "rounds": []})
        try:
            built = time.monotonic()
            clients[i] = Client(workload, device)
            for _ in range(FIRST_WARMUP_STEPS):
                clients[i].step()
            records[i]["build_s"] = round(time.monotonic() - built, 1)
        except Exception as exc:  # noqa: BLE001 - one workload's failure is its record, the rest still run
            clients.pop(i, None)
            records[i]["error"] = str(exc)[:300]
    print(f"built {len(clients)} workloads in {time.monotonic() - began:.0f} s", flush=True)
    for r in range(rounds):
        round_began = time.monotonic()
        order = list(clients)[r % len(clients):] + list(clients)[:r % len(clients)]
        for i in order:
            visit = clients[i].visit(WARMUP_STEPS, steps)
            visit.update(round=r, sm_clock_mhz=_sm_clock_mhz(), load_1min=os.getloadavg()[0])
            records[i]["rounds"].append(visit)
        took = time.monotonic() - round_began
        probes.append(_host_probe_us())
        print(f"round {r}: {took:.0f} s, a CPU op's dispatch {probes[-1]:.2f} us", flush=True)
        # The profiles take less than a round's time; stop where another round would not leave room for them.
        if time.monotonic() - began + 2 * took > budget_s:
            break
    for i, client in clients.items():
        records[i].update(client.profile())
        walls = [v["wall_ms"] for v in records[i]["rounds"]]
        records[i].update(wall_ms_median=statistics.median(walls), wall_ms_rounds_min=min(walls),
                          wall_ms_rounds_max=max(walls))
        records[i].update({f"{name}_ms_median": statistics.median(v[f"{name}_ms"] for v in records[i]["rounds"])
                           for name in PHASES})
    host = {"gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
            "cpu": _cpu_model(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "host_probe_us": [round(p, 3) for p in probes]}
    return [{**record, **host} for record in records]


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--steps", type=int, default=TIMED_STEPS, help="timed steps a visit")
    parser.add_argument("--budget-s", type=float, default=250.0, help="start no round that would end past this")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.backends.cudnn.benchmark = True
    records = measure(torch.device(args.device), args.rounds, args.steps, args.budget_s)
    with args.out.open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    print(f"{'workload':<45} {'wall ms':>8} {'spread':>7} {'fwd':>6} {'bwd':>6} {'opt':>5} {'sync':>6} "
          f"{'kernel ms':>9} {'kernels':>7}")
    for record in records:
        label = Workload(**record["workload"]).label
        if "error" in record:
            print(f"{label:<45} error: {record['error'][:80]}")
            continue
        spread = (record["wall_ms_rounds_max"] - record["wall_ms_rounds_min"]) / record["wall_ms_median"]
        print(f"{label:<45} {record['wall_ms_median']:8.2f} {spread:7.1%} {record['forward_ms_median']:6.2f} "
              f"{record['backward_ms_median']:6.2f} {record['optimizer_ms_median']:5.2f} "
              f"{record['sync_ms_median']:6.2f} {record['kernel_ms']:9.2f} {record['kernels']:7d}")


if __name__ == "__main__":
    main()
