"""The committed counts cache (benchmarks/accuracy/counts.xz) that every accuracy script's `--counts-cache` reads: it
is a pickle of engine.counts' types, so it must still load after those types move or change."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from engine.counts import WorkloadCounts

ACCURACY = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy"


def count_cache() -> ModuleType:
    spec = importlib.util.spec_from_file_location("count_cache", ACCURACY / "count_cache.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_counts_cache_loads_as_todays_workload_counts() -> None:
    counts = count_cache().read_cache(ACCURACY / "counts.xz")
    found = [c for c in counts.values() if c is not None]
    assert len(found) > 3000
    assert all(isinstance(c, WorkloadCounts) and c.ops for c in found)
