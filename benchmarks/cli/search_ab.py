"""The host's step times with cuDNN's algorithm search off and on: two measurement logs of one sample, compared by
key; and, given the rows each log gave when replayed (`evaluate --replay --measured-only`), hostaware's error against
the ground truth with either, on the rows both scored.

    python -m benchmarks.cli.search_ab benchmarks/cli/results/search-off.jsonl benchmarks/cli/results/search-on.jsonl
    python -m benchmarks.cli.search_ab OFF.jsonl ON.jsonl --rows OFF/rows.csv ON/rows.csv --json OUT.json
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path
from typing import Any


def done(path: Path) -> dict[str, dict[str, Any]]:
    """The log's finished measurements by key (its first line is the host)."""
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row["key"]: row for row in rows if row.get("measurement", {}).get("status") == "done"}


def scored(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """A replayed report's rows that hostaware answered, by target and workload."""
    with path.open(newline="") as handle:
        return {(row["target"], row["workload_key"]): row for row in csv.DictReader(handle)
                if row["hostaware_outcome"] == "done" and row["hostaware_predicted_ms"]}


def steps(off: dict[str, dict[str, Any]], on: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The host's step without the search over the step with it, per workload both logs finished."""
    ratios = []
    print("| workload | search off ms | search on ms | off / on |\n|---|---:|---:|---:|")
    for key in [key for key in off if key in on]:
        w = off[key]["workload"]
        off_ms, on_ms = off[key]["measurement"]["min_ms"], on[key]["measurement"]["min_ms"]
        ratios.append(off_ms / on_ms)
        print(f"| {w['model']} {w['mode']} b{w['batch_size']} | {off_ms:.2f} | {on_ms:.2f} | {ratios[-1]:.3f} |")
    if not ratios:
        return {"workloads": 0}
    print(f"\n{len(ratios)} workloads: off / on median {statistics.median(ratios):.3f}, mean "
          f"{statistics.mean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
    return {"workloads": len(ratios), "median": statistics.median(ratios), "mean": statistics.mean(ratios),
            "min": min(ratios), "max": max(ratios)}


def _error(row: dict[str, str]) -> float:
    """Signed relative error of the prediction, (predicted - measured) / measured."""
    return float(row["hostaware_predicted_ms"]) / float(row["measured_ms"]) - 1


def predictions(off: dict[tuple[str, str], dict[str, str]],
                on: dict[tuple[str, str], dict[str, str]]) -> dict[str, Any]:
    """hostaware's error with either log on the rows both answered, overall and per mode."""
    common = [key for key in off if key in on]
    summary: dict[str, Any] = {}
    print("\n| rows | n | MAPE search off | MAPE search on | bias off | bias on | prediction off / on (median, range) |"
          "\n|---|---:|---:|---:|---:|---:|---|")
    for label, keys in [("all", common)] + [(mode, [k for k in common if on[k]["mode"] == mode])
                                            for mode in sorted({on[k]["mode"] for k in common})]:
        if not keys:
            continue
        e_off, e_on = [_error(off[k]) for k in keys], [_error(on[k]) for k in keys]
        shift = [float(off[k]["hostaware_predicted_ms"]) / float(on[k]["hostaware_predicted_ms"]) for k in keys]
        row = {"rows": len(keys), "mape_off": 100 * statistics.mean(abs(e) for e in e_off),
               "mape_on": 100 * statistics.mean(abs(e) for e in e_on), "bias_off": 100 * statistics.mean(e_off),
               "bias_on": 100 * statistics.mean(e_on), "shift_median": statistics.median(shift),
               "shift_min": min(shift), "shift_max": max(shift)}
        summary[label] = row
        print(f"| {label} | {len(keys)} | {row['mape_off']:.1f} % | {row['mape_on']:.1f} % | {row['bias_off']:+.1f} % "
              f"| {row['bias_on']:+.1f} % | {row['shift_median']:.3f} "
              f"({row['shift_min']:.3f}-{row['shift_max']:.3f}) |")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("off", type=Path, help="measurement log, search off")
    parser.add_argument("on", type=Path, help="measurement log, search on")
    parser.add_argument("--rows", type=Path, nargs=2, metavar=("OFF_ROWS", "ON_ROWS"),
                        help="rows.csv of each log replayed with hostaware")
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args()
    summary: dict[str, Any] = {"steps": steps(done(args.off), done(args.on))}
    if args.rows:
        summary["predictions"] = predictions(scored(args.rows[0]), scored(args.rows[1]))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
