"""The host's step times with cuDNN's algorithm search off and on: two measurement logs of one sample, compared by key.

    python -m benchmarks.cli.search_ab benchmarks/cli/results/search-off.jsonl benchmarks/cli/results/search-on.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def done(path: Path) -> dict[str, dict[str, Any]]:
    """The log's finished measurements by key (its first line is the host)."""
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row["key"]: row for row in rows if row.get("measurement", {}).get("status") == "done"}


def main() -> None:
    off, on = done(Path(sys.argv[1])), done(Path(sys.argv[2]))
    ratios = []
    print("| workload | search off ms | search on ms | off / on |\n|---|---:|---:|---:|")
    for key in [key for key in off if key in on]:
        w = off[key]["workload"]
        off_ms, on_ms = off[key]["measurement"]["min_ms"], on[key]["measurement"]["min_ms"]
        ratios.append(off_ms / on_ms)
        print(f"| {w['model']} {w['mode']} b{w['batch_size']} | {off_ms:.2f} | {on_ms:.2f} | {ratios[-1]:.3f} |")
    if ratios:
        print(f"\n{len(ratios)} workloads: off / on median {statistics.median(ratios):.3f}, mean "
              f"{statistics.mean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
