"""The roofline both `analytic` and `hostaware` price work with: per kernel, the larger of its math time on the
unit that runs it and its memory time, plus a launch cost; summed by kernel class.

Classes match the host profiler's kernel classes (engine.timing.kernel_class): 'tensor' (tensor-core math),
'simt' (depthwise convolutions and fp32 matmuls on the plain lanes) and 'other' (everything memory-bound, the NCHW
layout conversions around tensor-core convolutions included).

Rates are the target's sustained ones (TargetSpec.sustained_*: the clock it holds under its power limit), and each
unit has its own efficiency: an fp32 GEMM keeps the plain lanes busy (cuBLAS's SGEMM reaches most of FP32 peak),
a depthwise convolution barely does (it is memory-bound in all but name), and its integer index arithmetic takes the
lanes a consumer chip shares between FP32 and INT32 (TargetSpec.fp32_share_beside_int32). A "serial" kernel
(PyTorch's NCHW bilinear resize) is bound by neither: a few threads each loop over every image and channel, one
memory latency per iteration.

A kernel's bytes need not all come from DRAM: a tensor its producer has just written is still in L2 when it fits.
`L2Reuse` says how much of a kernel's traffic L2 can serve (Efficiency.l2_reuse, or one given to roofline_ms); it is
what separates an RTX 4090 (72 MB of L2) from an RTX 3090 (6 MB) at nearly equal DRAM bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from understudy.catalog import TargetSpec
from engine.counts import WorkloadCounts

CLASS_OF_KIND = {"tensor": "tensor", "matmul32": "simt", "depthwise": "simt", "grouped": "simt", "memory": "other",
                 "norm": "other", "layout": "other", "strided": "other", "serial": "other", "fused": "other"}
# The kinds on the plain lanes whose price carries least surely from one card to another: depthwise and thin grouped
# convolutions reach a small, chip-dependent share of the lanes. An fp32 GEMM, the other plain-lane kind, is
# compute-bound at a well-known share of peak. The error band widens with their share of a step (convolution_share).
PLAIN_LANE_CONVOLUTIONS = ("depthwise", "grouped")


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak a kernel class reaches, and a fixed cost per kernel (launch and tail)."""

    tensor: float
    simt: float  # depthwise and thin grouped convolutions on the plain lanes
    memory: float
    launch_us: float
    matmul32: float = 0.6  # fp32 GEMMs on the plain lanes (PyTorch keeps fp32 matmuls off TF32 by default)
    layout: float = 1.0  # share of the counted NCHW<->NHWC conversion bytes a GPU really moves
    strided: float = 1.0  # how much slower than a dense one a kernel gathering from a permuted tensor moves its bytes
    # Bytes a memory-bound kernel keeps in flight per SM and cycle (Little's law): its bandwidth is at most this x SMs
    # x clock. Binds on a GPU with much bandwidth per SM (an H200's PyTorch kernels reach about half of its 4.8 TB/s);
    # 0: no such limit.
    bytes_per_sm_cycle: float = 0.0
    # The same limit for a strided kernel (a gather from a permuted tensor): its uncoalesced accesses keep fewer bytes
    # in flight, so where the dense limit binds (an H200, the data-center parts) it binds harder; on a GeForce card,
    # with a fifth of an H200's bandwidth per SM, neither does. 0: no limit of its own.
    strided_bytes_per_sm_cycle: float = 0.0
    # Tensor-core FLOP an SM can be fed per cycle: its shared memory and registers deliver operands at a fixed rate
    # per cycle, so the chips whose tensor cores do 1,024 to 4,096 dense FLOP per SM and cycle (workstation and
    # data-center parts) reach a smaller share of that peak than GeForce cards at 512. 0: no such limit.
    tensor_flop_per_sm_cycle: float = 0.0
    # A training step's kernels run slower than their counts (backward convolutions and normalisation backward reach
    # less of the units than forward kernels do): a multiplier on a training step's time, the same for every format.
    training_overhead: float = 1.0
    # What a 16-bit training step's NCHW layout conversions cost beyond the forward's weight (`layout`). They stand
    # for the NCHW backward around every tensor-core convolution: cuDNN's NCHW normalisation backward and the
    # gradients' conversions to and from NHWC move half-precision tensors at about the element rate of fp32 ones, so
    # at twice their cost per byte (the H200's ResNet-50 training, h200-kernel-profile.jsonl: BatchNorm 9.2 ms in AMP
    # NCHW, 3.7 ms channels-last, 11.0 ms in fp32 NCHW for twice the bytes; transposes 3.3 ms in AMP, 3.6 ms in fp32).
    # A channels-last step has no conversions and so no such cost; an fp32 step's kernels run at their bytes. 1: no
    # extra.
    training_layout: float = 1.0
    # A multiplier on the time of a depthwise convolution PyTorch runs on its own kernels with a filter of 1, 3 or 5
    # ('depthwise' ops: engine.counting._native_depthwise; cuDNN's and the wider filters' are 'grouped') in a
    # training step. The backward's grad_weight is a reduction over the batch and image per weight, with a few taps'
    # arithmetic per element read: MobileNetV3's depthwise kernels took 6.6 ms of its training step in fp32 and
    # 6.7 ms in bf16 on the H200, where they are PyTorch's, and 3.0 ms in fp16, where most are cuDNN's
    # (h200-kernel-profile-4.jsonl). On a 7 x 7 filter PyTorch's kernels are no slower than the price: a multiplier
    # on them (three of convnext_tiny's eighteen take an NCHW input) took its bf16 training to 1.25x its time.
    # 1: no extra.
    depthwise_training: float = 1.0
    # A multiplier on a BatchNorm's time in a bf16 training step ('norm' ops). PyTorch hands BatchNorm to cuDNN in
    # fp32 and fp16 but never in bf16 (_batch_norm_impl_index), and its own kernels' statistics and backward
    # reductions are slower: on the H200 a BatchNorm model's memory-bound time in AMP training is 1.2-1.3x in bf16
    # what it is in fp16 (resnet18 9.7 against 7.9 ms, resnet50 22.9 against 17.3; convnext_tiny and vit_base,
    # with no BatchNorm, the same in both). Inference's normalisation, one elementwise pass, runs as fast in either.
    # 1: no extra.
    bf16_norm_training: float = 1.0
    # A multiplier on the time of a convolution cuDNN runs for a depthwise layer PyTorch does not keep ('grouped' ops:
    # a 7 x 7 filter, a channels-last input) in an fp32 training step. cuDNN computes its weight gradient as a TF32
    # implicit GEMM over an indexed, mostly empty tile (sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32: 26.7 ms of
    # convnext_tiny's fp32 training step on the H200, h200-kernel-profile.jsonl, for work the plain lanes would do in
    # a few), where in 16 bit it runs a depthwise kernel. 1: no extra.
    grouped_fp32_training: float = 1.0
    # Share of a memory-bound kernel's traffic L2 serves when its tensors fit in half the L2 (L2Reuse); 0: none.
    l2_reuse: float = 0.0
    # Share of DRAM peak a kernel inductor generates ('fused': torch.compile's chains of memory-bound ops) reaches,
    # where DRAM and not the bytes in flight limit it; 0: a memory-bound kernel's (`memory`).
    fused_memory: float = 0.0
    # Nanoseconds one iteration of a "serial" kernel's per-thread loop takes (engine.counting._SERIAL): a memory
    # latency, which no GPU's bandwidth or clock shortens. 0: such kernels are priced by their bytes alone.
    serial_ns: float = 0.0

    def serial_rate(self) -> float:
        """Iterations per second of a serial kernel's loop."""
        return 1e9 / self.serial_ns if self.serial_ns > 0 else float("inf")

    def reuse(self) -> L2Reuse | None:
        """The L2 reuse l2_reuse describes, if any."""
        return L2Reuse(fraction=min(1.0, self.l2_reuse), usable=0.5) if self.l2_reuse > 0 else None

    def bytes_weight(self, kind: str, precision: str, training: bool) -> float:
        """What a kernel of `kind` costs per counted byte, relative to a dense memory-bound kernel, in a step of
        `precision` (training if `training`)."""
        layout = self.layout * (self.training_layout if training and precision != "fp32" else 1.0)
        return {"layout": layout, "strided": self.strided}.get(kind, 1.0)

    def time_weight(self, kind: str, precision: str, training: bool) -> float:
        """A multiplier on the roofline time of a kernel of `kind` in a step of `precision` (training if
        `training`): PyTorch's own depthwise backward (depthwise_training), bf16 BatchNorm (bf16_norm_training) and
        cuDNN's fp32 depthwise weight gradient (grouped_fp32_training) are slower than the price by a share, not by
        a rate of the GPU's, so the multipliers leave the ratio between GPUs as the forward's."""
        if not training:
            return 1.0
        if kind == "norm":
            return self.bf16_norm_training if precision in ("amp-bf16", "bf16") else 1.0
        if kind == "grouped":
            return self.grouped_fp32_training if precision == "fp32" else 1.0
        # Not in fp16, where the few such convolutions cuDNN is not handed are those of under 32 channels, dilated or
        # narrower than 7: the timm training file (AMP fp16) wants no multiplier on them.
        return self.depthwise_training if kind == "depthwise" and precision not in ("amp-fp16", "fp16") else 1.0

    def tensor_feed(self, precision: str) -> float:
        """Tensor-core FLOP an SM can be fed per cycle in `precision` (0: no limit). The limit is one of operand
        bytes: a TF32 operand (an fp32 convolution's) is stored in 4 bytes, a 16-bit one in 2, so an SM is fed half
        the TF32 FLOP per cycle."""
        return self.tensor_flop_per_sm_cycle * (0.5 if precision == "fp32" else 1.0)

    def tensor_tflops(self, gpu: TargetSpec, precision: str) -> float:
        """The tensor rate a convolution or matmul reaches on `gpu`: a share of its peak, or the feed limit."""
        reached = gpu.sustained_tensor_tflops(precision) * self.tensor
        if self.tensor_flop_per_sm_cycle > 0:
            reached = min(reached, self.tensor_feed(precision) * gpu.sm_count * gpu.tensor_clock(precision) / 1e6)
        return reached

    def bandwidth_gbps(self, gpu: TargetSpec, strided: bool = False, fused: bool = False) -> float:
        """The bandwidth a memory-bound kernel (a strided one if `strided`, one inductor generated if `fused`)
        reaches on `gpu`: a share of its peak, or the issue limit."""
        share = self.fused_memory if fused and self.fused_memory > 0 else self.memory
        reached = gpu.memory_bandwidth_gbps * share
        limits = (self.bytes_per_sm_cycle, self.strided_bytes_per_sm_cycle if strided else 0.0)
        for per_sm_cycle in (limit for limit in limits if limit > 0):
            reached = min(reached, per_sm_cycle * gpu.sm_count * gpu.sustained_clock() / 1e3)
        return reached


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
                reuse: L2Reuse | None = None, training: bool = False) -> dict[str, float]:
    """Milliseconds per class for one step on `gpu` (a training step if `training`); `reuse`, when given, replaces
    the efficiency's own L2 reuse."""
    return by_class(roofline_kind_ms(counts, gpu, precision, eff, reuse, training))


def by_class(kind_ms: dict[str, float]) -> dict[str, float]:
    """Milliseconds per class, of milliseconds per kind."""
    totals = {"tensor": 0.0, "simt": 0.0, "other": 0.0}
    for kind, value in kind_ms.items():
        totals[CLASS_OF_KIND[kind]] += value
    return totals


def convolution_share(kind_ms: dict[str, float]) -> float | None:
    """The share of a step's milliseconds in plain-lane convolutions (PLAIN_LANE_CONVOLUTIONS); None for no time."""
    total = sum(kind_ms.values())
    return sum(kind_ms.get(kind, 0.0) for kind in PLAIN_LANE_CONVOLUTIONS) / total if total > 0 else None


def roofline_kind_ms(counts: WorkloadCounts, gpu: TargetSpec, precision: str, eff: Efficiency,
                     reuse: L2Reuse | None = None, training: bool = False) -> dict[str, float]:
    """Milliseconds per kernel kind (engine.counting's kinds) for one step on `gpu`; see roofline_ms."""
    plain_lanes = gpu.sustained_fp32_tflops() * gpu.fp32_share_beside_int32() * 1e12 * eff.simt
    rate_of_kind = {
        "tensor": eff.tensor_tflops(gpu, precision) * 1e12,
        "matmul32": gpu.sustained_fp32_tflops() * 1e12 * eff.matmul32,
        "depthwise": plain_lanes,
        "grouped": plain_lanes,
        "serial": eff.serial_rate(),
    }
    dense, strided = eff.bandwidth_gbps(gpu) * 1e9, eff.bandwidth_gbps(gpu, strided=True) * 1e9
    fused = eff.bandwidth_gbps(gpu, fused=True) * 1e9
    totals: dict[str, float] = {}
    if not counts.ops:
        return totals
    kinds = [kind for kind, _, _ in counts.ops]
    flops = np.array([flops for _, flops, _ in counts.ops], dtype=float)
    weights = np.array([eff.bytes_weight(kind, precision, training) for kind in kinds])
    moved = dram_bytes(np.array([moved for _, _, moved in counts.ops], dtype=float) * weights, gpu,
                       reuse or eff.reuse())
    rates = np.array([rate_of_kind.get(kind, 1.0) for kind in kinds])
    bandwidth = np.array([{"strided": strided, "fused": fused}.get(kind, dense) for kind in kinds])
    compute = np.divide(flops, rates, out=np.zeros_like(flops), where=flops > 0)
    slower = np.array([eff.time_weight(kind, precision, training) for kind in kinds])
    seconds = np.maximum(compute, moved / bandwidth) * slower + eff.launch_us * 1e-6
    scale = 1e3 * (eff.training_overhead if training else 1.0)
    for kind, value in zip(kinds, seconds.tolist(), strict=True):
        totals[kind] = totals.get(kind, 0.0) + value * scale
    return totals
