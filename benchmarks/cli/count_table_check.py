"""Whether the shipped count table gives what a trace counts, here: a random sample of its workloads, each at a random
batch size, read from the table and traced with this machine's torch and timm, compared kernel by kernel.

    .venv/bin/python -m benchmarks.cli.count_table_check --sample 40 --out benchmarks/cli/results/count-table-check.json
    .venv/bin/python -m benchmarks.cli.count_table_check --precision amp-bf16 --sample 60 \
        --out benchmarks/cli/results/count-table-check-bf16.json
    .venv/bin/python -m benchmarks.cli.count_table_check --precision fp32 --sample 40 \
        --out benchmarks/cli/results/count-table-check-fp32.json
    .venv/bin/python -m benchmarks.cli.count_table_check --memory-format nhwc --sample 40 \
        --out benchmarks/cli/results/count-table-check-nhwc.json
    .venv/bin/python -m benchmarks.cli.count_table_check --precision amp-bf16 --memory-format nhwc --sample 40 \
        --out benchmarks/cli/results/count-table-check-bf16-nhwc.json
    .venv/bin/python -m benchmarks.cli.count_table_check --precision fp32 --memory-format nhwc --sample 40 \
        --out benchmarks/cli/results/count-table-check-fp32-nhwc.json

`--models FILE` samples the families of those models alone (the ones a change to the trace touched, say).

The table was made with one torch (its `about`); running this under another (the GPU host's) says whether that
torch counts the same kernels. With `--precision amp-bf16` (or fp32) and `--memory-format nhwc` the sampled families
are read in that precision and format: from their own entry, or an amp-bf16 one from its amp-fp16 twin, and traced in
it and compared; those the table does not answer are counted apart.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from understudy.workload import Workload
from engine.count_table import installed_timm, same_counts, shipped_table
from engine.counting import count_workload
from engine.counts import WorkloadCounts


def relative(a: float, b: float) -> float:
    """|a - b| over the larger of the two (or one, so that two near-zero counts are not called apart)."""
    return abs(a - b) / max(abs(a), abs(b), 1.0)


def largest_difference(read: WorkloadCounts, counted: WorkloadCounts) -> float:
    """The largest relative difference of a kernel's FLOPs or bytes or the peak, kernels matched in sorted order
    (inf when the kernels differ in number or kind)."""
    ops_read, ops_counted = sorted(read.ops), sorted(counted.ops)
    if len(ops_read) != len(ops_counted) or any(a[0] != b[0] for a, b in zip(ops_read, ops_counted, strict=True)):
        return float("inf")
    pairs = [(a[i], b[i]) for a, b in zip(ops_read, ops_counted, strict=True) for i in (1, 2)]
    pairs.append((read.peak_live_bytes, counted.peak_live_bytes))
    return max((relative(a, b) for a, b in pairs), default=0.0)


def total_differences(read: WorkloadCounts, counted: WorkloadCounts) -> dict[str, float]:
    """The relative difference of the step's total FLOPs and total bytes, and of its peak: how much the kernels that
    differ move what the estimate prices."""
    pairs = {"flops": (sum(op[1] for op in read.ops), sum(op[1] for op in counted.ops)),
             "bytes": (sum(op[2] for op in read.ops), sum(op[2] for op in counted.ops)),
             "peak": (read.peak_live_bytes, counted.peak_live_bytes)}
    return {name: round(relative(a, b), 6) for name, (a, b) in pairs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="amp-fp16", help="the precision the sampled workloads are read in")
    parser.add_argument("--memory-format", default="nchw", choices=["nchw", "nhwc"],
                        help="the memory format the sampled workloads are read in")
    parser.add_argument("--models", type=Path, help="a file of model names, one a line: sample their families only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    models = set(args.models.read_text().split()) if args.models else None
    table = shipped_table()
    if table is None:
        print(f"the shipped table is not for this timm ({installed_timm()})", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    # One entry per family: its amp-fp16 NCHW one (a family with other entries too would otherwise be drawn more
    # often).
    families = [family for family, _ in table.entries()
                if family["precision"] == "amp-fp16" and family["memory_format"] == "nchw"
                and (models is None or family["model"] in models)]
    rows: list[dict[str, Any]] = []
    for family in rng.sample(families, min(args.sample, len(families))):
        workload = Workload.model_validate({**family, "batch_size": rng.randint(2, 512), "precision": args.precision,
                                            "memory_format": args.memory_format})
        affine = table.get(workload)
        if affine is None:
            rows.append({"workload": workload.label, "in_table": False})
            continue
        read = affine.at(workload.batch_size)
        started = time.perf_counter()
        try:
            counted = count_workload(workload)
        except Exception as exc:  # noqa: BLE001 - a model this timm cannot build is that row's result
            rows.append({"workload": workload.label, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        rows.append({"workload": workload.label, "same": same_counts(read, counted),
                     "largest_difference": largest_difference(read, counted),
                     "total_difference": total_differences(read, counted), "kernels": len(counted.ops),
                     "kernels_read": len(read.ops),
                     "trace_s": round(time.perf_counter() - started, 2)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report = {"table": table.about, "here": {"torch": metadata.version("torch"), "timm": installed_timm()},
              "precision": args.precision, "memory_format": args.memory_format, "sample": len(rows),
              "not_in_table": sum(1 for row in rows if row.get("in_table") is False),
              "same": sum(1 for row in rows if row.get("same")),
              "errors": sum(1 for row in rows if "error" in row), "rows": rows}
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    print(f"{report['same']} of {report['sample'] - report['not_in_table']} read from the table the same, "
          f"{report['not_in_table']} not in it (table: torch {table.about.get('torch')}, "
          f"here: torch {report['here']['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
