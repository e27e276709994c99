"""The committed counts cache (benchmarks/accuracy/counts.xz) that every accuracy script's `--counts-cache` reads: it
is a pickle of engine.counts' types, so it must still load after those types move or change."""

from __future__ import annotations

from engine.counts import WorkloadCounts
from tests.scripts import REPO, load_script


def test_the_committed_counts_cache_loads_as_todays_workload_counts() -> None:
    read_cache = load_script("benchmarks/accuracy/count_cache.py").read_cache
    counts = read_cache(REPO / "benchmarks" / "accuracy" / "counts.xz")
    found = [c for c in counts.values() if c is not None]
    assert len(found) > 3000
    assert all(isinstance(c, WorkloadCounts) and c.ops for c in found)
