"""The calibrated estimator's accuracy with k = 3, 5 and 10 measured rows per target.

For each target and k, `--draws` times: pick k rows of that target at random as the user's measurements, fit
understudy.calibration.fit_scale on the base estimator's predictions for them, and score the corrected
predictions on the target's OTHER rows. Reads the rows.jsonl of an `understudy evaluate` report.

    python benchmarks/accuracy/calibration.py benchmarks/accuracy/report/rows.jsonl --base hostaware
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from understudy.calibration import fit_scale  # noqa: E402
from evaluation.metrics import error_summary  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", type=Path)
    parser.add_argument("--base", default="hostaware")
    parser.add_argument("--ks", default="3,5,10")
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-rows", type=int, default=20, help="targets with fewer rows are left out")
    args = parser.parse_args()
    by_target: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in args.rows.read_text().splitlines():
        row = json.loads(line)
        predicted = row.get(f"{args.base}_predicted_ms")
        if predicted:
            by_target[row["target"]].append((float(predicted), float(row["measured_ms"])))
    rng = random.Random(args.seed)
    print(f"| target | rows | {args.base} MAPE % (uncalibrated) | k | calibrated MAPE % (mean over {args.draws} "
          "draws) | min | max |")
    print("|---|---|---|---|---|---|---|")
    for target, pairs in sorted(by_target.items()):
        if len(pairs) < args.min_rows:
            continue
        base = error_summary([m for _, m in pairs], [p for p, _ in pairs])["mape"]
        for k in (int(v) for v in args.ks.split(",")):
            scores = []
            for _ in range(args.draws):
                chosen = set(rng.sample(range(len(pairs)), k))
                scale = fit_scale([pairs[i][0] for i in chosen], [pairs[i][1] for i in chosen])
                rest = [pairs[i] for i in range(len(pairs)) if i not in chosen]
                scores.append(error_summary([m for _, m in rest], [p * scale for p, _ in rest])["mape"])
            print(f"| {target} | {len(pairs)} | {base:.1f} | {k} | {sum(scores) / len(scores):.1f} | "
                  f"{min(scores):.1f} | {max(scores):.1f} |")


if __name__ == "__main__":
    main()
