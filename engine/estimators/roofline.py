"""The roofline both `analytic` and `hostaware` price work with: per kernel, the larger of its math time on the
unit that runs it and its memory time, plus a launch cost; summed by kernel class.

Classes match the host profiler's kernel classes (worker.timing.kernel_class): 'tensor' (tensor-core math),
'simt' (depthwise convolutions and fp32 matmuls on the plain lanes) and 'other' (everything memory-bound).

A kernel's bytes need not all come from DRAM: a tensor its producer has just written is still in L2 when it fits.
`L2Reuse` (optional) says how much of a kernel's traffic L2 can serve; it is what separates an RTX 4090 (72 MB of
L2) from an RTX 3090 (6 MB) at nearly equal DRAM bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from understudy.catalog import TargetSpec
from engine.counting import WorkloadCounts

CLASS_OF_KIND = {"tensor": "tensor", "matmul32": "simt", "depthwise": "simt", "memory": "other"}


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak a kernel class reaches, and a fixed cost per kernel (launch and tail)."""

    tensor: float
    simt: float
    memory: float
    launch_us: float


@dataclass(frozen=True)
class L2Reuse:
    """A kernel moving `bytes` reads and writes share(bytes) = min(1, usable x L2 / bytes) of them through L2
    instead of DRAM, times `fraction`."""

    fraction: float  # of a kernel's traffic that L2 can serve when all of it fits
    usable: float  # share of L2 a kernel's tensors can occupy (the chips' L2 is two partitions)


def dram_bytes(moved: np.ndarray, gpu: TargetSpec, reuse: L2Reuse | None) -> np.ndarray:
    """Bytes each kernel moves to and from DRAM, of the `moved` bytes it touches."""
    if reuse is None:
        return moved
    capacity = reuse.usable * gpu.l2_cache_mb * 1e6
    return moved * (1.0 - reuse.fraction * np.minimum(1.0, capacity / np.maximum(moved, 1.0)))


def roofline_ms(counts: WorkloadCounts, gpu: TargetSpec, precision: str, eff: Efficiency,
                reuse: L2Reuse | None = None) -> dict[str, float]:
    """Milliseconds per class for one step on `gpu`."""
    tensor_rate = gpu.tensor_tflops(precision) * 1e12 * eff.tensor
    simt_rate = float(gpu.fp32_tflops or 0) * 1e12 * eff.simt
    bandwidth = gpu.memory_bandwidth_gbps * 1e9 * eff.memory
    totals = {"tensor": 0.0, "simt": 0.0, "other": 0.0}
    if not counts.ops:
        return totals
    kinds = [kind for kind, _, _ in counts.ops]
    flops = np.array([flops for _, flops, _ in counts.ops], dtype=float)
    moved = dram_bytes(np.array([moved for _, _, moved in counts.ops], dtype=float), gpu, reuse)
    rates = np.array([tensor_rate if kind == "tensor" else simt_rate for kind in kinds])
    compute = np.divide(flops, rates, out=np.zeros_like(flops), where=flops > 0)
    seconds = np.maximum(compute, moved / bandwidth) + eff.launch_us * 1e-6
    for kind, value in zip(kinds, seconds.tolist(), strict=True):
        totals[CLASS_OF_KIND[kind]] += value * 1e3
    return totals
