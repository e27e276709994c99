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
from engine.count_lookup import counts_for
from engine.estimators.base import Estimate, Estimator, out_of_memory
from engine.estimators.roofline import Efficiency, by_class, convolution_share, roofline_kind_ms

# Chosen by benchmarks/accuracy/fit_constants.py on every timm row and the H200's own rows (analytic-logo.json,
# "chosen_on_all"; the H200's rows include development models in fp32 and bf16, h200-precisions.jsonl), with three
# held: a serial kernel's 360 ns per iteration, as the H200's profile shows it (efficientformerv2_s0's two resizes:
# 2 x 262,144 iterations in 189 ms), the launch cost, 5 us (left free it grows to 30-80 us, which fits batch-1024 rows
# no better and makes small batches absurdly slow), and the strided weight, 1 (the strided kernels' own
# bytes-in-flight limit prices them instead; with both free they trade off). Depthwise convolutions reach 0.11 of
# the FP32 lanes they can issue to (half the peak on a consumer chip, all of it on an H200), and those PyTorch runs
# on its own kernels with a small filter take 7.4x that time in an fp32 or bf16 training step (their backward), those
# cuDNN runs 3.2x in an fp32 training step (its TF32 weight gradient; chosen on convnext_large's fp32 training, the
# one development row that has them); a bf16 training step's BatchNorms 2.4x theirs (PyTorch's own kernels); fp32
# GEMMs 0.78 of FP32 peak. The caps bind on the H200: 8.4 bytes in flight per SM and cycle (2.2 of its 4.8 TB/s; 5.4
# for a strided kernel) and 2,688 tensor FLOP per SM and cycle in 16 bit, half that in TF32 (702 and 351 TFLOPS). A
# training step runs 1.10x its counts, and a 16-bit one's NCHW layout conversions 4.0x their inference weight
# (cuDNN's NCHW backward); L2 serves 0.31 of the traffic of a memory-bound kernel whose tensors fit in half of it (an
# RTX 4090's 72 MB holds what an RTX 3090's 6 MB does not). The kernels torch.compile's inductor generates reach 0.82
# of DRAM peak, where PyTorch's eager kernels reach 0.92: chosen on timm's compiled RTX 4090 file, the one compiled
# ground truth (benchmarks/accuracy/compile_fused.py; 0.815-0.83 with each model family left out); no eager row is
# priced differently, and on a part whose bytes-in-flight limit binds (an H100, an H200) it changes nothing.
EFFICIENCY = Efficiency(tensor=0.9719, simt=0.1101, memory=0.9159, launch_us=5, matmul32=0.7801, layout=0.4376,
                        strided=1, bytes_per_sm_cycle=8.3846, strided_bytes_per_sm_cycle=5.3769,
                        tensor_flop_per_sm_cycle=2687.8092, training_overhead=1.0971, training_layout=3.9649,
                        depthwise_training=7.3659, bf16_norm_training=2.3668,
                        grouped_fp32_training=3.2346, l2_reuse=0.3052, serial_ns=360.2, fused_memory=0.82)


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
        kind_ms = roofline_kind_ms(counts_for(workload), target, workload.precision, EFFICIENCY,
                                   training=workload.mode == "train")
        parts = by_class(kind_ms)
        total = sum(parts.values())
        return Estimate(latency_ms=total, median_ms=total, spread_ms=0.0,
                        details={"class_ms": {k: round(v, 4) for k, v in parts.items()},
                                 "class_shares": {k: v / total for k, v in parts.items()} if total > 0 else None,
                                 "convolution_share": convolution_share(kind_ms)})
