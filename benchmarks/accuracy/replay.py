"""`understudy evaluate` with the counts of a counts cache (count_cache.py) instead of counting every workload again.

Replaying the H200's measurements through the shipped estimators counts each workload on the meta device, about
50 minutes for the ~530 workloads on the project's 2-core machine; the cache holds the same counts (made by the same
code on the GPU host's 16 cores). A workload the cache lacks is counted as usual. Arguments after the cache are
`understudy evaluate`'s.

    python benchmarks/accuracy/replay.py /tmp/counts.pkl ../shared/groundtruth/*.csv --out benchmarks/accuracy/report \\
        --log benchmarks/accuracy/h200-measurements.jsonl --replay --measured-only \\
        --estimators spec,flops,hostaware,analytic --max-measured-ms 1000 --seed 0
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine.counting as counting
from count_cache import read_cache
from understudy.workload import Workload


def main() -> None:
    cache = read_cache(Path(sys.argv[1]))
    count = counting.count_workload

    def cached(workload: Workload) -> counting.WorkloadCounts:
        found = cache.get(workload.digest())
        return found if found is not None else count(workload)

    # counts_for (engine.counts, what every estimator calls) looks count_workload up in engine.counting at each call
    # (after the shipped count table, whose counts are the counted ones).
    counting.count_workload = cached
    sys.argv = ["understudy", "evaluate", *sys.argv[2:]]
    from cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
