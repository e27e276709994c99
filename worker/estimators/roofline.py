"""The roofline both `analytic` and `hostaware` price work with: per kernel, the larger of its math time on the
unit that runs it and its memory time, plus a launch cost; summed by kernel class.

Classes match the host profiler's kernel classes (worker.timing.kernel_class): 'tensor' (tensor-core math),
'simt' (depthwise convolutions and fp32 matmuls on the plain lanes) and 'other' (everything memory-bound).
"""

from __future__ import annotations

from dataclasses import dataclass

from understudy.catalog import TargetSpec
from worker.counting import WorkloadCounts

CLASS_OF_KIND = {"tensor": "tensor", "matmul32": "simt", "depthwise": "simt", "memory": "other"}


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak a kernel class reaches, and a fixed cost per kernel (launch and tail)."""

    tensor: float
    simt: float
    memory: float
    launch_us: float


def roofline_ms(counts: WorkloadCounts, gpu: TargetSpec, precision: str, eff: Efficiency) -> dict[str, float]:
    """Milliseconds per class for one step on `gpu`."""
    tensor_rate = gpu.tensor_tflops(precision) * 1e12 * eff.tensor
    simt_rate = float(gpu.fp32_tflops or 0) * 1e12 * eff.simt
    bandwidth = gpu.memory_bandwidth_gbps * 1e9 * eff.memory
    totals = {"tensor": 0.0, "simt": 0.0, "other": 0.0}
    for kind, flops, moved in counts.ops:
        rate = tensor_rate if kind == "tensor" else simt_rate
        seconds = max(flops / rate if flops else 0.0, moved / bandwidth) + eff.launch_us * 1e-6
        totals[CLASS_OF_KIND[kind]] += seconds * 1e3
    return totals
