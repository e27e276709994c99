"""`analytic`: a roofline from FLOPs and bytes counted on the meta device. Needs no GPU, so it runs anywhere.

The efficiencies were chosen on the RTX 3090 inference ground truth and are reported on the RTX 4090 (and the
reverse) in benchmarks/accuracy/.
"""

from __future__ import annotations

from functools import lru_cache

from understudy.catalog import TargetSpec
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from worker.counting import WorkloadCounts, count_workload
from worker.estimators.base import Estimate, Estimator
from worker.estimators.roofline import Efficiency, roofline_ms

EFFICIENCY = Efficiency(tensor=0.6, simt=0.5, memory=0.7, launch_us=3.0)


@lru_cache(maxsize=64)
def counts_for(workload: Workload) -> WorkloadCounts:
    return count_workload(workload)


class AnalyticEstimator(Estimator):
    name = "analytic"
    version = "1"
    needs_gpu = False

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        return None

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        parts = roofline_ms(counts_for(workload), target, workload.precision, EFFICIENCY)
        total = sum(parts.values())
        return Estimate(latency_ms=total, median_ms=total, spread_ms=0.0,
                        details={"class_ms": {k: round(v, 4) for k, v in parts.items()}})
