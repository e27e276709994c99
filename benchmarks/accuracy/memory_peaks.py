"""On the GPU host: the peak memory of timm's OOM back-off rows, with the host's memory capped at the row's card.

For each back-off row of a timm file (see memory.py), run the step as timm's benchmark.py does (an inference file's in
eval mode, a training file's forward, backward and optimizer step; AMP, cudnn.benchmark, the file's memory format) at
the recorded batch and at the next larger batch of timm's decay, with the caching allocator capped at the card's memory
(torch.cuda.set_per_process_memory_fraction). Written per run: whether it fit, and the peak allocated and reserved bytes
(appended to OUT; rows already there are skipped, so a later call goes on where one ran out of time). Whether the capped
host reproduces the file's facts says how much of them any prediction can hope to get right: what fit then depended on
that day's torch and cuDNN, not on the model alone (benchmarks/accuracy/README.md).

    python3 benchmarks/accuracy/memory_peaks.py .gt/timm-infer-amp-nchw-rtx3090-pt240.csv --out peaks.jsonl \\
        --seconds 300
    python benchmarks/accuracy/memory_peaks.py --summarize benchmarks/accuracy/h200-memory-peaks.jsonl \\
        --counts-cache benchmarks/accuracy/counts.xz ../shared/groundtruth/timm-infer-amp-n*-rtx3090-pt240.csv
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from count_cache import read_cache
from engine.estimators.memory import predict_memory
from memory import next_larger, scaled
from understudy.catalog import catalog
from understudy.workload import Workload, workload_from_row
from engine.workloads import make_step
from evaluation.evaluate import read_rows

GIB = 1024**3


def peak(workload: Workload, cap_gib: float) -> dict[str, object]:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.set_per_process_memory_fraction(cap_gib * GIB / torch.cuda.get_device_properties(0).total_memory)
    fit = True
    step = None
    try:
        step = make_step(workload, "cuda")  # the engine's step: inference under no_grad, autocast at AMP
        for _ in range(3):
            step.run()
        torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        fit = False
    result = {"fit": fit, "allocated_gib": torch.cuda.max_memory_allocated() / GIB,
              "reserved_gib": torch.cuda.max_memory_reserved() / GIB}
    step = None
    torch.cuda.empty_cache()
    return result


def read_log(path: Path) -> list[dict]:
    """The records of a log this script wrote."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(path: Path, files: list[Path], counts_cache: Path | None) -> dict[str, object]:
    """How many rows the capped host reproduces: the recorded batch fits, the next larger does not, both. With the
    timm files and a counts cache, also how many of the capped host's own facts the GPU-free prediction
    (engine.estimators.memory) gets right: a check of the prediction against today's software."""
    records = read_log(path)
    fits = sum(r["recorded"]["fit"] for r in records)
    ooms = sum(not r["above"]["fit"] for r in records)
    both = sum(r["recorded"]["fit"] and not r["above"]["fit"] for r in records)
    summary: dict[str, object] = {"rows": len(records), "fits_at_recorded": fits, "oom_above": ooms,
                                  "both_right": both, "both_right_percent": round(100 * both / max(1, len(records)), 1)}
    if files and counts_cache:
        counts = read_cache(counts_cache)
        workloads = {}
        for file in files:
            for row in read_rows([file]):
                try:
                    workload = workload_from_row(row)
                except Exception:  # noqa: BLE001 - a model this timm lacks
                    continue
                workloads[(file.name, workload.model, workload.batch_size, workload.resolution[0])] = workload
        scored = facts = rows_right = 0
        for record in records:
            workload = workloads.get((record["file"], record["model"], record["batch"], record["resolution"]))
            found = counts.get(workload.digest()) if workload else None
            if workload is None or found is None:
                continue
            right = []
            for key, batch in (("recorded", record["batch"]), ("above", record["larger"])):
                estimate = predict_memory(scaled(found, batch / record["batch"], workload),
                                          workload.model_copy(update={"batch_size": batch}))
                right.append((estimate.total_gb <= record["cap_gib"]) == record[key]["fit"])
            scored += 1
            facts += sum(right)
            rows_right += all(right)
        summary["prediction_vs_capped_host"] = {
            "rows": scored, "facts_right": facts, "facts": 2 * scored,
            "rows_both_right_percent": round(100 * rows_right / max(1, scored), 1)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--summarize", type=Path, help="print how many rows of this log the capped host reproduced")
    parser.add_argument("--counts-cache", type=Path,
                        help="with --summarize and the timm files: also score the prediction on the capped host's "
                        "facts")
    args = parser.parse_args()
    if args.summarize:
        print(json.dumps(summarize(args.summarize, args.files, args.counts_cache)))
        return
    if not args.files or args.out is None:
        parser.error("give the timm files and --out (or --summarize LOG)")
    torch.backends.cudnn.benchmark = True
    jobs = []
    for path in args.files:
        rows = read_rows([path])
        usual = Counter(int(r["batch_size"]) for r in rows).most_common(1)[0][0]
        for row in rows:
            batch = int(row["batch_size"])
            if batch < usual:
                jobs.append((path.name, row, batch, next_larger(batch, usual)))
    random.Random(0).shuffle(jobs)
    done = {(r["file"], r["model"], r["resolution"], r["batch"])
            for r in (read_log(args.out) if args.out.exists() else [])}
    started = time.monotonic()
    with args.out.open("a") as out:
        for name, row, batch, larger in jobs:
            if time.monotonic() - started > args.seconds:
                break
            try:
                workload = workload_from_row(row)
            except Exception:  # noqa: BLE001 - a model this timm lacks
                continue
            if (name, row["model"], workload.resolution[0], batch) in done:
                continue
            cap = catalog().get(row["target"]).memory_size_gb
            record = {"file": name, "model": row["model"], "resolution": workload.resolution[0], "batch": batch,
                      "larger": larger, "cap_gib": cap,
                      "recorded": peak(workload, cap),
                      "above": peak(workload.model_copy(update={"batch_size": larger}), cap)}
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
