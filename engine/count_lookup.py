"""Where a prediction gets a workload's counts: the shipped count table when it holds the workload, else a trace on
the meta device. Reading the table needs no torch, so a new workload's first estimate can come before torch has
loaded (cli/local.py).
"""

from __future__ import annotations

from functools import lru_cache

from understudy.workload import Workload
from engine.count_table import shipped_counts
from engine.counts import WorkloadCounts


@lru_cache(maxsize=256)
def counts_for(workload: Workload) -> WorkloadCounts:
    """The workload's counts, kept for the workloads seen last (every estimator of a request prices the same counts):
    from the shipped count table where it holds them, counted on the meta device otherwise."""
    shipped = shipped_counts(workload)
    if shipped is not None:
        return shipped
    from engine import counting  # here, not at the top: counting imports torch

    return counting.count_workload(workload)
