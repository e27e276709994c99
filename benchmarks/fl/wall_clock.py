"""Check the traces' wall-clock step (understudy/steps.py) against measured eager steps of small FL workloads.

The model: an eager step takes its kernels' GPU time plus what the CPU spends launching them,

    wall_ms = kernel_ms + kernels x LAUNCH_US / 1000,

with `kernels` the step's launches as the engine counts them on the meta device (engine/counting.py, what every
prediction stores as details["kernels"]) and `kernel_ms` the GPU time of one step as the H200's profiler measured it
(results/*.jsonl: benchmarks/fl/small_steps.py on the H200; the model is checked, not the estimators' GPU times).
LAUNCH_US is chosen on the fit rows (every other workload of the first run) by the least mean |log error|, and
every row is reported; the same is done against the median of the three runs of small_steps.py, and for the
alternative form max(kernel_ms, kernels x LAUNCH_US), for comparison. Writes results/wall-clock.json and prints the
tables README.md quotes.

    .venv/bin/python benchmarks/fl/wall_clock.py        # no GPU: the counts come from the meta device
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.counting import count_workload
from understudy.workload import Workload

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = ("h200-small-steps.jsonl", "h200-small-steps-rerun1.jsonl", "h200-small-steps-rerun2.jsonl")
TOLERANCE = 0.15
Form = Callable[[float, int, float], float]
FORMS: dict[str, Form] = {
    "kernels + launches": lambda kernel_ms, kernels, launch_us: kernel_ms + kernels * launch_us / 1000,
    "max(kernels, launches)": lambda kernel_ms, kernels, launch_us: max(kernel_ms, kernels * launch_us / 1000),
}


@dataclass(frozen=True)
class Row:
    """One workload: its meta-device launch count, its profile and its measured wall-clock steps."""

    label: str
    kernels: int  # launches counted on the meta device
    profiled_kernels: int
    kernel_ms: float
    runs_ms: tuple[float, ...]  # the first run first

    def measured(self, target: str) -> float:
        return self.runs_ms[0] if target == "first run" else statistics.median(self.runs_ms)


def load() -> list[Row]:
    runs = [[json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()] for name in RUNS]
    rows = []
    for measured in zip(*runs, strict=True):
        workload = Workload(**measured[0]["workload"])
        rows.append(Row(label=workload.label, kernels=len(count_workload(workload).ops),
                        profiled_kernels=measured[0]["kernels"], kernel_ms=measured[0]["kernel_ms"],
                        runs_ms=tuple(m["wall_ms_median"] for m in measured)))
    return rows


def choose(rows: list[Row], form: Form, target: str) -> float:
    """LAUNCH_US in 0.1 us steps minimising the mean |log error| over `rows`."""
    def loss(launch_us: float) -> float:
        return statistics.fmean(abs(math.log(form(r.kernel_ms, r.kernels, launch_us) / r.measured(target)))
                                for r in rows)
    return min((round(0.1 * i, 1) for i in range(10, 1500)), key=loss)


@dataclass(frozen=True)
class Report:
    form: str
    target: str
    launch_us: float
    errors: list[float]

    @property
    def within(self) -> int:
        return sum(abs(e) <= TOLERANCE for e in self.errors)

    @property
    def held(self) -> list[float]:
        return self.errors[1::2]


def report(rows: list[Row], form_name: str, target: str) -> Report:
    form = FORMS[form_name]
    launch_us = choose(rows[0::2], form, target)
    return Report(form_name, target, launch_us,
                  [form(r.kernel_ms, r.kernels, launch_us) / r.measured(target) - 1 for r in rows])


def main() -> None:
    rows = load()
    reports = [report(rows, form, target) for target in ("first run", "median of 3 runs") for form in FORMS]
    print("| workload | launches (meta) | kernels (profiled) | kernel ms | wall ms: first run, rerun 1, rerun 2 |")
    print("|---|---|---|---|---|")
    for r in rows:
        runs = ", ".join(f"{ms:.1f}" for ms in r.runs_ms)
        print(f"| {r.label} | {r.kernels} | {r.profiled_kernels} | {r.kernel_ms:.2f} | {runs} |")
    print()
    print("| form | measured | LAUNCH_US (fit rows) | within 15 %: all 14 | held-out 7 | held-out mean abs |")
    print("|---|---|---|---|---|---|")
    for rep in reports:
        held_within = sum(abs(e) <= TOLERANCE for e in rep.held)
        print(f"| {rep.form} | {rep.target} | {rep.launch_us} | {rep.within} | {held_within} of {len(rep.held)} | "
              f"{statistics.fmean(abs(e) for e in rep.held):.1%} |")
    print()
    shipped = reports[0]
    print(f"per row, {shipped.form} at {shipped.launch_us} us against the first run (fit rows marked *):")
    for i, (r, e) in enumerate(zip(rows, shipped.errors, strict=True)):
        print(f"  {'*' if i % 2 == 0 else ' '} {r.label:<45} {e:+.1%}")
    (RESULTS / "wall-clock.json").write_text(json.dumps(
        {"rows": [asdict(r) for r in rows], "reports": [asdict(rep) for rep in reports]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
