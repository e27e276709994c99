"""`analytic`: a roofline from FLOPs and bytes counted on the meta device. Needs no GPU, so it runs anywhere.

The efficiencies were chosen on the RTX 3090 inference ground truth and are reported on the RTX 4090 in
benchmarks/accuracy/.
"""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.estimator_info import estimator_info
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from engine.counting import counts_for
from engine.estimators.base import Estimate, Estimator, out_of_memory
from engine.estimators.roofline import Efficiency, roofline_ms

# Chosen by benchmarks/accuracy/fit_constants.py on all RTX 3090 inference rows (no GPU needed), with the launch
# cost held at 5 us: left free it grows to 80 us, which fits batch-1024 rows no better and makes small batches
# absurdly slow. Depthwise convolutions reach only a few percent of FP32 peak: they are memory-bound.
EFFICIENCY = Efficiency(tensor=0.8143, simt=0.0387, memory=0.8419, launch_us=5.0, matmul32=0.8226, layout=0.246,
                        bytes_per_sm_cycle=7.327, tensor_flop_per_sm_cycle=1517.0, training_overhead=1.2)


class AnalyticEstimator(Estimator):
    name = "analytic"
    version = estimator_info("analytic").version
    needs_gpu = False

    def plan(self, workload: Workload, target: TargetSpec, host: HostInfo) -> HostSetting | None:
        return None

    def estimate(self, workload: Workload, target: TargetSpec, host: HostInfo,
                 measurement: Measurement | None) -> Estimate:
        if (oom := out_of_memory(workload, target)) is not None:
            return oom
        parts = roofline_ms(counts_for(workload), target, workload.precision, EFFICIENCY,
                            training=workload.mode == "train")
        total = sum(parts.values())
        return Estimate(latency_ms=total, median_ms=total, spread_ms=0.0,
                        details={"class_ms": {k: round(v, 4) for k, v in parts.items()},
                                 "class_shares": {k: v / total for k, v in parts.items()} if total > 0 else None})
