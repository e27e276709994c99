"""Check the traces' wall-clock step (understudy/steps.py) against measured eager steps of small FL workloads.

The model: an eager step is paced by whichever is slower, the GPU running its kernels or the CPU issuing its ops
(the dispatcher, autograd's bookkeeping and the kernel launch of every op),

    wall_ms = max(kernel_ms, kernels x LAUNCH_US / 1000),

with `kernels` the step's ops as the engine counts them on the meta device (engine/counting.py, what every
prediction stores as details["kernels"]) and `kernel_ms` the GPU time of one step as the H200's profiler measured it
(results/*.jsonl: benchmarks/fl/small_steps.py on the H200; the model is checked, not the estimators' GPU times).
LAUNCH_US is chosen on the fit rows (every other workload) by the least mean |log error|, and every row is reported,
the held-out ones apart. Two other forms are scored the same way: the sum kernel_ms + kernels x LAUNCH_US, and the max
with the optimizer's CPU time per parameter tensor (measured on the fit rows' optimizer phase) added to the issue.
Each is checked against the interleaved run (results/h200-small-steps-rounds.jsonl, twenty workloads) and against
the median of the three earlier runs (fourteen of them). The shipped form is also checked on a second interleaved
run of the twenty on another machine (results/h100-small-steps-rounds.jsonl), with LAUNCH_US chosen again on its fit
rows and as shipped (understudy/steps.py). Writes results/wall-clock.json and prints the tables README.md quotes.

    .venv/bin/python benchmarks/fl/wall_clock.py        # no GPU: the counts come from the meta device
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.counting import count_workload
from engine.workloads import build_model
from understudy.steps import LAUNCH_US, launch_ms, wall_ms
from understudy.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
ROUNDS_RUN = "h200-small-steps-rounds.jsonl"
# The same script run again, on the lent H100 (same driver, torch and CPU model), five interleaved rounds.
SECOND_RUN = "h100-small-steps-rounds.jsonl"
EARLIER_RUNS = ("h200-small-steps.jsonl", "h200-small-steps-rerun1.jsonl", "h200-small-steps-rerun2.jsonl")
TOLERANCE = 0.15


@dataclass(frozen=True)
class Row:
    """One workload: its meta-device counts, its profile and its measured wall-clock steps."""

    label: str
    kernels: int  # ops counted on the meta device
    param_tensors: int
    profiled_kernels: int
    kernel_ms: float
    wall_ms: float  # the interleaved run
    forward_ms: float  # the CPU's time in each phase of the interleaved run's steps
    backward_ms: float
    optimizer_ms: float
    sync_ms: float
    earlier_ms: tuple[float, ...]  # the three earlier runs, where they timed the workload

    @property
    def issue_ms(self) -> float:
        """The CPU's time to issue the step: its phases up to the final `loss.item()`."""
        return self.forward_ms + self.backward_ms + self.optimizer_ms


def profiled(record: dict[str, Any]) -> tuple[int, float]:
    """The profiled step's kernels (count, ms). The interleaved run's profile lists the GPU-side spans of the step's
    fl::forward, fl::optimizer and fl::sync markers among its GPU events (small_steps.py written before it left them
    out): the first event (the forward's span opens with its first kernel), the last (the sync's span, over the copy
    of the loss) and the longest of the rest (the optimizer's). Without them the fourteen workloads the earlier runs
    also profiled have those runs' kernel times within 3 %."""
    events = list(record["kernel_us"][1:-1])
    events.remove(max(events))
    return len(events), sum(events) / 1e3


def _records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()]


def load() -> list[Row]:
    earlier = [_records(name) for name in EARLIER_RUNS]
    rows = []
    for i, record in enumerate(_records(ROUNDS_RUN)):
        workload = Workload(**record["workload"])
        count, kernel_ms = profiled(record)
        params = build_model(workload, "meta").parameters()
        rows.append(Row(
            label=workload.label, kernels=len(count_workload(workload).ops),
            param_tensors=sum(1 for p in params if p.requires_grad), profiled_kernels=count, kernel_ms=kernel_ms,
            wall_ms=record["wall_ms_median"], forward_ms=record["forward_ms_median"],
            backward_ms=record["backward_ms_median"], optimizer_ms=record["optimizer_ms_median"],
            sync_ms=record["sync_ms_median"],
            earlier_ms=tuple(run[i]["wall_ms_median"] for run in earlier if i < len(run))))
    return rows


def second_run(rows: Sequence[Row]) -> list[Row]:
    """The same twenty workloads, in the same order, from SECOND_RUN: another machine, its own kernel times and
    phases; the meta-device counts are the same."""
    second = []
    for row, record in zip(rows, _records(SECOND_RUN), strict=True):
        if Workload(**record["workload"]).label != row.label:
            raise ValueError(f"{SECOND_RUN} lists {record['workload']} where {ROUNDS_RUN} has {row.label}")
        count, kernel_ms = profiled(record)
        second.append(replace(
            row, profiled_kernels=count, kernel_ms=kernel_ms, wall_ms=record["wall_ms_median"],
            forward_ms=record["forward_ms_median"], backward_ms=record["backward_ms_median"],
            optimizer_ms=record["optimizer_ms_median"], sync_ms=record["sync_ms_median"], earlier_ms=()))
    return second


def param_us(rows: Sequence[Row]) -> float:
    """The optimizer's CPU time per parameter tensor (us): the median over the fit rows of the optimizer phase over
    the weights it steps (foreach SGD gathers every weight, gradient and momentum buffer in Python before its few
    kernels)."""
    return statistics.median(r.optimizer_ms * 1000 / r.param_tensors for r in rows[0::2])


Form = Callable[[Row, float], float]


def forms(rows: Sequence[Row]) -> dict[str, Form]:
    per_param = param_us(rows)
    return {
        "max(kernels, issue)": lambda r, us: max(r.kernel_ms, r.kernels * us / 1000),
        "kernels + issue": lambda r, us: r.kernel_ms + r.kernels * us / 1000,
        "max(kernels, issue + params)": lambda r, us: max(r.kernel_ms,
                                                          (r.kernels * us + r.param_tensors * per_param) / 1000),
    }


@dataclass(frozen=True)
class Report:
    form: str
    measured: str
    launch_us: float
    errors: list[float]

    @property
    def within(self) -> int:
        return sum(abs(e) <= TOLERANCE for e in self.errors)

    @property
    def held(self) -> list[float]:
        return self.errors[1::2]


def report(rows: Sequence[Row], name: str, form: Form, measured: str, target: Callable[[Row], float]) -> Report:
    """LAUNCH_US in 0.1 us steps minimising the mean |log error| over the fit rows (every other one), and every
    row's error at it."""
    def loss(us: float) -> float:
        return statistics.fmean(abs(math.log(form(r, us) / target(r))) for r in rows[0::2])
    launch_us = min((round(0.1 * i, 1) for i in range(10, 1500)), key=loss)
    return Report(name, measured, launch_us, [form(r, launch_us) / target(r) - 1 for r in rows])


def main() -> None:
    rows = load()
    earlier = [r for r in rows if r.earlier_ms]
    candidates = forms(rows)
    reports = [report(rows, name, form, "interleaved run", lambda r: r.wall_ms) for name, form in candidates.items()]
    reports += [report(earlier, name, form, "median of 3 earlier runs", lambda r: statistics.median(r.earlier_ms))
                for name, form in forms(earlier).items()]
    again = second_run(rows)
    reports.append(report(again, "max(kernels, issue)", candidates["max(kernels, issue)"], "second run (H100)",
                          lambda r: r.wall_ms))

    print("| workload | ops (meta) | weights | kernels (profiled) | kernel ms | forward | backward | optimizer | "
          "sync | wall ms | issue us/op | optimizer us/weight | earlier runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows):
        runs = ", ".join(f"{ms:.1f}" for ms in r.earlier_ms) or "-"
        print(f"| {'*' if i % 2 == 0 else ''}{r.label} | {r.kernels} | {r.param_tensors} | {r.profiled_kernels} | "
              f"{r.kernel_ms:.2f} | {r.forward_ms:.2f} | {r.backward_ms:.2f} | {r.optimizer_ms:.2f} | "
              f"{r.sync_ms:.2f} | {r.wall_ms:.2f} | {1000 * r.issue_ms / r.kernels:.1f} | "
              f"{1000 * r.optimizer_ms / r.param_tensors:.1f} | {runs} |")
    print()
    print(f"optimizer CPU time per weight tensor (median of the fit rows): {param_us(rows):.1f} us")
    print()
    print("| form | measured | LAUNCH_US (fit rows) | within 15 %: all | fit rows | held-out rows | "
          "held-out mean abs |")
    print("|---|---|---|---|---|---|---|")
    for rep in reports:
        fit = rep.errors[0::2]
        print(f"| {rep.form} | {rep.measured} | {rep.launch_us} | {rep.within} of {len(rep.errors)} | "
              f"{sum(abs(e) <= TOLERANCE for e in fit)} of {len(fit)} | "
              f"{sum(abs(e) <= TOLERANCE for e in rep.held)} of {len(rep.held)} | "
              f"{statistics.fmean(abs(e) for e in rep.held):.1%} |")
    print()
    shipped = reports[0]
    print(f"per row, {shipped.form} at {shipped.launch_us} us against the {shipped.measured} (fit rows marked *):")
    for i, (r, e) in enumerate(zip(rows, shipped.errors, strict=True)):
        print(f"  {'*' if i % 2 == 0 else ' '} {r.label:<45} {e:+.1%}")
    # As the traces compute it (understudy/steps.py), from the profiled kernel time.
    shipped_again = [wall_ms(r.kernel_ms, launch_ms(r.kernels)) / r.wall_ms - 1 for r in again]
    print()
    print(f"the second run (H100), as shipped: max(kernel ms, ops x {LAUNCH_US} us), within 15 % on "
          f"{sum(abs(e) <= TOLERANCE for e in shipped_again)} of {len(again)}, "
          f"{sum(abs(e) <= TOLERANCE for e in shipped_again[1::2])} of 10 held out; per row (kernel ms, measured ms):")
    for i, (r, e) in enumerate(zip(again, shipped_again, strict=True)):
        print(f"  {'*' if i % 2 == 0 else ' '} {r.label:<45} {r.kernel_ms:6.2f} {r.wall_ms:7.2f} {e:+.1%}")
    (RESULTS / "wall-clock.json").write_text(json.dumps(
        {"rows": [asdict(r) for r in rows], "param_us": param_us(rows),
         "reports": [asdict(rep) for rep in reports],
         "second_run": {"file": SECOND_RUN, "launch_us": LAUNCH_US, "rows": [asdict(r) for r in again],
                        "errors": shipped_again}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
