"""Score the predicted peak memory (engine.estimators.memory) on timm's OOM back-off, and choose its two allocator
constants on some files while reporting the others.

timm's benchmark starts every inference run at the file's usual batch (1024; 512 in the RTX 4090 channels-last file)
and on OOM steps down its decay (1024, 768, 512, 384, 256, 192, 128, ...). A row recorded below the usual batch is
therefore two facts about that 24 GB card: the recorded batch fits, and the next larger batch of the decay did not.
A row at the usual batch says only that it fits. Every check here is one of those facts.

    python benchmarks/accuracy/memory.py ../shared/groundtruth/timm-infer-*.csv --counts-cache /tmp/counts.pkl \\
        --choose-on rtx3090 --json benchmarks/accuracy/memory.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from count_cache import read_cache
from understudy.catalog import catalog
from understudy.workload import workload_from_row
from engine.counting import WorkloadCounts
from engine.estimators.memory import ALLOCATOR, AllocatorModel, fits, predict_memory
from evaluation.evaluate import read_rows


def decay_step(batch: int) -> int:
    """timm's decay_batch_step(batch, num_intra_steps=2): the next smaller batch it tries after an OOM."""
    if batch <= 1:
        return 0
    base = int(2 ** (math.log(batch - 1) // math.log(2)))
    step = max(base // 2, 1)
    return base + ((batch - base - 1) // step) * step


def next_larger(batch: int, usual: int) -> int:
    """The batch timm tried just before `batch` (and that did not fit)."""
    previous = usual
    while (smaller := decay_step(previous)) > batch:
        previous = smaller
    return previous


def scaled(counts: WorkloadCounts, factor: float) -> WorkloadCounts:
    """Inference counts at `factor` times the batch: activations and inputs grow with it, weights do not."""
    return replace(counts, peak_live_bytes=counts.peak_live_bytes * factor, input_bytes=counts.input_bytes * factor)


def checks(files: list[Path], counts: dict) -> list[dict]:
    out = []
    for path in files:
        rows = read_rows([path])
        usual = Counter(int(r["batch_size"]) for r in rows).most_common(1)[0][0]
        for row in rows:
            try:
                workload = workload_from_row(row)
            except Exception:  # noqa: BLE001 - a model this timm lacks
                continue
            found = counts.get(workload.digest())
            if found is None:
                continue
            target = catalog().get(row["target"])
            batch = int(row["batch_size"])
            out.append({"file": path.name, "kind": "fits", "backoff": batch < usual, "model": row["model"],
                        "batch": batch, "workload": workload, "counts": found, "target": target, "expect_fit": True})
            if batch < usual:
                larger = next_larger(batch, usual)
                bigger = workload.model_copy(update={"batch_size": larger})
                out.append({"file": path.name, "kind": "oom-above", "backoff": True, "model": row["model"],
                            "batch": larger, "workload": bigger, "counts": scaled(found, larger / batch),
                            "target": target, "expect_fit": False})
    return out


def score(items: list[dict], model: AllocatorModel) -> dict[str, dict[str, float]]:
    """Per file: the share right of the back-off rows (both facts right), and of all fit facts."""
    result: dict[str, dict[str, float]] = {}
    for name in sorted({i["file"] for i in items}):
        mine = [i for i in items if i["file"] == name]
        right = {id(i): fits(predict_memory(i["counts"], i["workload"], model), i["target"]) == i["expect_fit"]
                 for i in mine}
        backoff_rows = {}
        for i in mine:
            if i["backoff"]:
                key = (i["model"], i["workload"].resolution)
                backoff_rows[key] = backoff_rows.get(key, True) and right[id(i)]
        usual = [right[id(i)] for i in mine if not i["backoff"]]
        result[name] = {
            "backoff_rows": len(backoff_rows),
            "backoff_both_right": round(100 * sum(backoff_rows.values()) / max(1, len(backoff_rows)), 1),
            "fits_at_recorded": round(100 * sum(right[id(i)] for i in mine if i["backoff"] and i["expect_fit"])
                                      / max(1, sum(1 for i in mine if i["backoff"] and i["expect_fit"])), 1),
            "oom_above": round(100 * sum(right[id(i)] for i in mine if not i["expect_fit"])
                               / max(1, sum(1 for i in mine if not i["expect_fit"])), 1),
            "usual_batch_rows": len(usual),
            "usual_batch_fit_right": round(100 * sum(usual) / max(1, len(usual)), 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--counts-cache", type=Path, required=True)
    parser.add_argument("--choose-on", help="choose the constants on files whose name contains this")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    counts = read_cache(args.counts_cache)
    items = checks(args.files, counts)
    model = ALLOCATOR
    if args.choose_on:
        chosen = [i for i in items if args.choose_on in i["file"]]

        def accuracy(candidate: AllocatorModel) -> float:
            per_file = score(chosen, candidate)
            return sum(f["backoff_both_right"] + f["usual_batch_fit_right"] for f in per_file.values())

        grid = itertools.product([0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5], [0.3, 0.5, 0.75, 1.0, 1.25, 1.5])
        model = max((AllocatorModel(s, f) for s, f in grid), key=accuracy)
    report = {"constants": {"activation_slack": model.activation_slack, "fixed_gb": model.fixed_gb},
              "chosen_on": args.choose_on or "shipped", "files": score(items, model)}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
