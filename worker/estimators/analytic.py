"""`analytic`: a roofline from FLOPs and bytes counted on the meta device. Needs no GPU, so it runs anywhere.

The efficiencies were chosen on the RTX 3090 inference ground truth and are reported on the RTX 4090 in
benchmarks/accuracy/.
"""

from __future__ import annotations

from functools import lru_cache

from understudy.catalog import TargetSpec
from understudy.estimator_info import estimator_info
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from worker.counting import WorkloadCounts, count_workload
from worker.estimators.base import Estimate, Estimator
from worker.estimators.roofline import Efficiency, roofline_ms

# Chosen by benchmarks/accuracy/fit_constants.py on all RTX 3090 inference rows (no GPU needed); the large launch
# cost stands for what a roofline cannot see (small kernels, launch gaps, tails).
EFFICIENCY = Efficiency(tensor=0.747, simt=0.039, memory=1.027, launch_us=81.7)


@lru_cache(maxsize=256)
def counts_for(workload: Workload) -> WorkloadCounts:
    return count_workload(workload)


class AnalyticEstimator(Estimator):
    name = "analytic"
    version = estimator_info("analytic").version
    needs_gpu = False

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        return None

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        parts = roofline_ms(counts_for(workload), target, workload.precision, EFFICIENCY)
        total = sum(parts.values())
        return Estimate(latency_ms=total, median_ms=total, spread_ms=0.0,
                        details={"class_ms": {k: round(v, 4) for k, v in parts.items()}})
