"""Draw the workloads a warm measuring process is timed on when they are new to it, at random from the models timm's
published benchmark runs cover, so that "a workload new to the process" is a sample rather than five chosen models.

    python -m benchmarks.cli.new_workloads ../shared/groundtruth/timm-train-amp-nchw-rtx3090-pt112.csv \\
        ../shared/groundtruth/timm-infer-amp-nchw-rtx4090-pt291.csv --per-file 10 \\
        --out benchmarks/cli/results/new-workloads.json

From each file, `--per-file` distinct models (seeded, each at the smallest resolution its rows give it), in the
file's mode, at batch 64 in AMP (fp16), NCHW: the default workload at the batch the other timings here use. A model
Understudy does not know (timm renamed a few since the 2022 file) is left out before the draw. The list is written as
JSON, the form `first_number.py --child --workloads` reads.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from evaluation.evaluate import read_rows
from understudy.errors import InvalidWorkload
from understudy.workload import Workload, check_model_name

BATCH = 64


def draw(path: Path, per_file: int, seed: int) -> list[dict[str, object]]:
    """`per_file` distinct known models of one file, each in the file's mode at its smallest resolution there."""
    skipped: list[str] = []
    by_model: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in read_rows([path], skipped=skipped):
        try:
            check_model_name(row["model"])
        except InvalidWorkload:
            continue
        by_model[row["model"]].append(row)
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    chosen = random.Random(seed).sample(sorted(by_model), min(per_file, len(by_model)))
    out = []
    for model in chosen:
        row = min(by_model[model], key=lambda r: int(r["resolution"]))
        workload = Workload(model=model, mode=row["mode"], batch_size=BATCH,
                            resolution=int(row["resolution"]))
        out.append(workload.model_dump(include={"model", "mode", "batch_size", "resolution"}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--per-file", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    workloads = [w for path in args.files for w in draw(path, args.per_file, args.seed)]
    args.out.write_text(json.dumps(workloads, indent=1) + "\n")
    print(f"{len(workloads)} workloads -> {args.out}")


if __name__ == "__main__":
    main()
