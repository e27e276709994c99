"""`analytic`: a roofline from FLOPs and bytes counted on the meta device. Needs no GPU, so it runs anywhere.

The constants were chosen leave-one-GPU-out (benchmarks/accuracy/fit_constants.py --logo): every development GPU's
rows are reported with constants chosen without them; the shipped ones are chosen on all timm rows and the H200's own
measurements of the development workloads (benchmarks/accuracy/README.md).
"""

from __future__ import annotations

from understudy.catalog import TargetSpec
from understudy.estimator_info import estimator_info
from understudy.results import HostInfo, HostSetting, Measurement
from understudy.workload import Workload
from engine.counting import counts_for
from engine.estimators.base import Estimate, Estimator, out_of_memory
from engine.estimators.roofline import Efficiency, roofline_ms

# Chosen by benchmarks/accuracy/fit_constants.py on every timm row and the H200's own rows (analytic-logo.json,
# "chosen_on_all"; the H200's rows include development models in fp32 and bf16, h200-precisions.jsonl), with three
# held: a serial kernel's 360 ns per iteration, as the H200's profile shows it (efficientformerv2_s0's two resizes:
# 2 x 262,144 iterations in 189 ms), the launch cost, 5 us (left free it grows to 30-80 us, which fits batch-1024 rows
# no better and makes small batches absurdly slow), and the strided weight, 1 (the strided kernels' own
# bytes-in-flight limit prices them instead; with both free they trade off). Depthwise convolutions reach only a few
# percent of FP32 peak (they are memory-bound), fp32 GEMMs 0.80 of it; the caps bind on the H200 (8.9 bytes in
# flight per SM and cycle, about 0.49 of its 4.8 TB/s; 6.1 for a strided kernel) and on parts with 2,048 to 4,096
# tensor FLOP per SM and cycle; a training step runs 1.09x its counts, and a 16-bit one's NCHW layout conversions
# 3.9x their inference weight (cuDNN's NCHW backward); L2 serves 0.17 of the traffic of a memory-bound kernel whose
# tensors fit in half of it (an RTX 4090's 72 MB holds what an RTX 3090's 6 MB does not).
EFFICIENCY = Efficiency(tensor=0.9684, simt=0.0551, memory=0.9317, launch_us=5.0, matmul32=0.8014, layout=0.456,
                        strided=1.0, bytes_per_sm_cycle=8.9289, strided_bytes_per_sm_cycle=6.144,
                        tensor_flop_per_sm_cycle=2078.6, training_overhead=1.0925, training_layout=3.9085,
                        l2_reuse=0.1683, serial_ns=360.2)


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
