"""Counting a workload's work without a GPU: every device kernel of one step traced on the meta device.

Each aten op the step dispatches becomes an OpCount with its kind (what unit limits it), FLOPs and bytes moved
(its tensor inputs read once, outputs written once). Views move nothing and launch nothing. The analytic and
host-aware estimators turn these counts into time on any GPU from its specifications.

Three things a GPU does that the meta device does not show are counted beside the ops:
- Layout conversions. cuDNN's tensor-core convolutions work in NHWC; given channels-first (NCHW) activations a GPU
  transposes them in and the result back out, one read and one write each way. Those are 'layout' ops, so a
  channels-last workload (no conversion) is priced apart from the same workload in NCHW.
- Strided copies. A memory-bound kernel reading a permuted tensor (a transpose or window partition made contiguous)
  gathers with uncoalesced accesses and moves its bytes more slowly than a dense one; those are 'strided' ops.
- Memory. The trace frees a tensor when the step's Python code drops its last reference, as the caching allocator
  does on a GPU, so the peak of the bytes alive during the trace is the step's peak of activations (and, in
  training, of saved activations and gradients). engine.estimators.memory turns it into a peak on the GPU.

A compiled workload (`Workload.compile`) is traced as its eager step, and its kernels are then fused as inductor fuses
them (engine.fusion).

Mixed precision is traced as CUDA's autocast runs it (`_Autocast`): torch.autocast does nothing on the meta device,
and a step traced wholly in fp16 misses what autocast really does: fp32 weights cast once per step (the cast
copies kept until its autocast region ends), normalisations, softmax and losses computed and stored in fp32, and
fp32 gradients.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import weakref

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.flop_counter import flop_registry

from understudy.workload import Workload
from engine.counts import OpKind, WorkloadCounts
from engine.fusion import FusionTrace, fuse
from engine.workloads import make_optimizer, make_step

aten = torch.ops.aten
_CONV = {aten.convolution.default, aten.convolution_backward.default, aten._convolution.default}
# PyTorch's CUDA kernels for bilinear and bicubic resizing of an NCHW tensor (upsample_bilinear2d_out_frame,
# upsample_bicubic2d_out_frame) give each output pixel one thread, which loops over every image and channel in
# turn: a 14 x 14 output is 196 threads, however large the batch. Such an op is "serial": its FLOP slot holds the
# iterations one thread runs (batch x channels), each a few dependent memory reads (engine.estimators.roofline).
_SERIAL = {aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec, aten.upsample_bicubic2d.default,
           aten.upsample_bicubic2d.vec}
_MATMUL = {
    aten.mm.default,
    aten.addmm.default,
    aten.bmm.default,
    aten.baddbmm.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
}
# BatchNorm, forward and backward: memory-bound like any elementwise op, but which kernels run it depends on the
# precision (Efficiency.bf16_norm_training), so its ops are a kind of their own.
_BATCH_NORM = {aten.native_batch_norm.default, aten.native_batch_norm_backward.default,
               aten._native_batch_norm_legit.default, aten._native_batch_norm_legit.no_stats,
               aten._native_batch_norm_legit_no_training.default}
# Ops that only read metadata or allocate: no kernel worth counting.
_FREE = {aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default, aten.lift_fresh.default}


def _tensors(values: Any, found: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The tensors among an op's arguments or results, however nested in tuples, lists and dicts (all an aten op
    takes or returns). By hand rather than with torch's pytree: this runs twice for every op of the step."""
    found = [] if found is None else found
    if isinstance(values, torch.Tensor):
        found.append(values)
    elif isinstance(values, list | tuple):
        for value in values:
            _tensors(value, found)
    elif isinstance(values, dict):
        for value in values.values():
            _tensors(value, found)
    return found


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _kind(func: Any, args: tuple[Any, ...], inputs: list[torch.Tensor], channels_first: bool) -> OpKind:
    if func in _CONV:
        backward = func is aten.convolution_backward.default
        source, weight = (args[1], args[2]) if backward else (args[0], args[1])
        stride, dilation, groups = (args[4], args[6], args[9]) if backward else (args[3], args[5], args[8])
        # Depthwise and thin grouped convolutions run on the plain FP32/FP16 lanes, not on tensor cores.
        if groups > 1 and weight.shape[1] <= 4:
            # PyTorch's own kernels are slow in training only on the small filters (Efficiency.depthwise_training).
            native = _native_depthwise(source, weight, stride, dilation, groups, channels_first)
            return "depthwise" if native and _small_filter(weight) else "grouped"
        return "tensor"
    if func in _BATCH_NORM:
        return "norm"
    if func in _SERIAL and not _channels_last_like(inputs[0]):
        return "serial"
    if func in _MATMUL:
        # PyTorch's default keeps fp32 matmuls off TF32 (convolutions may use it): they run on the FP32 lanes.
        return "matmul32" if args[0].dtype == torch.float32 else "tensor"
    if any(_permuted(t) for t in inputs):
        return "strided"
    return "memory"


def _native_depthwise(source: torch.Tensor, weight: torch.Tensor, stride: Sequence[int], dilation: Sequence[int],
                      groups: int, channels_first: bool) -> bool:
    """Whether PyTorch runs a thin grouped convolution on its own depthwise kernels rather than cuDNN's
    (Convolution.cpp's _select_conv_backend, use_cudnn_depthwise and check_cudnn_depthwise_workload_with_filter,
    cuDNN 8.2 and later): a depthwise one (a channel per group) on an NCHW input, unless it is in half precision and
    of a shape cuDNN takes there: at least 32 channels, undilated, a square filter of 1, 3 or 5, a square stride of
    1 or 2 (PyTorch's stride-2 rule also weighs batch and channels, and has changed between releases), at least 7
    wide. A channels-last input always goes to cuDNN: a channels-last workload's, and ConvNeXt's, whose blocks hand
    the next block a permuted (channels-last) tensor. A grouped convolution of a few channels per group (ResNeXt's)
    is not depthwise and goes to cuDNN too."""
    if not (source.dim() == 4 and source.shape[1] == groups):
        return False
    if not channels_first or _channels_last_like(source):
        return False
    half = source.dtype == torch.float16 and weight.dtype == torch.float16
    cudnn_shape = (groups >= 32 and all(d == 1 for d in dilation) and _small_filter(weight)
                   and stride[0] == stride[1] and stride[0] in (1, 2) and source.shape[3] >= 7)
    return not (half and cudnn_shape)


def _small_filter(weight: torch.Tensor) -> bool:
    """Whether a convolution's filter is square and 1, 3 or 5 wide (the ones cuDNN's depthwise kernels take)."""
    return weight.shape[2] == weight.shape[3] and weight.shape[3] in (1, 3, 5)


def _channels_last_like(tensor: torch.Tensor) -> bool:
    """Whether PyTorch takes a 4-d tensor for channels-last (Tensor::suggest_memory_format): its channels vary
    fastest, as in a (B, C, H, W) view of (B, HW, C) tokens. Its resizes then run a kernel with a thread per
    element."""
    return tensor.dim() == 4 and tensor.stride(1) < tensor.stride(3)


def _permuted(tensor: torch.Tensor) -> bool:
    """Whether a kernel reading `tensor` gathers across it: its strides, over the dimensions that are not size 1 or
    broadcast, are not in decreasing order (a transpose or permute), and it is not a dense channels-last tensor."""
    if tensor.dim() < 2 or tensor.numel() < 2:
        return False
    strides = [stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True) if size > 1 and stride]
    if all(a >= b for a, b in itertools.pairwise(strides)):
        return False
    return not (tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last))


def _layout_bytes(func: Any, args: tuple[Any, ...], out: Any) -> float:
    """Bytes the NCHW <-> NHWC transposes around one tensor-core convolution move: each activation-sized tensor
    (not the weights) read and written once more."""
    if func is aten.convolution_backward.default:
        activations = [args[0], args[1], out[0]]  # the output's gradient, the input, the input's gradient
    else:
        activations = [args[0], out]
    return 2.0 * sum(t.numel() * t.element_size() for t in activations if isinstance(t, torch.Tensor) and t.dim() == 4)


class _LiveBytes:
    """Bytes of the storages the traced step allocated and still holds, and their peak."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        # The live bytes after each allocation, in order: engine.count_table finds a step's peak at any batch size
        # from two of these.
        self.timeline: list[int] = []
        self._seen: set[int] = set()

    def add(self, tensors: list[torch.Tensor], inputs: Sequence[torch.Tensor] = ()) -> None:
        """Count the storages of `tensors` that are new: not one of `inputs` (an in-place op returns its input, which
        may be a weight the trace did not allocate) and not already counted."""
        given = {id(t.untyped_storage()) for t in inputs}
        for tensor in tensors:
            storage = tensor.untyped_storage()
            key = id(storage)
            if key in self._seen or key in given:
                continue
            size = storage.nbytes()
            self._seen.add(key)
            self.live += size
            self.peak = max(self.peak, self.live)
            self.timeline.append(self.live)
            weakref.finalize(storage, self._free, key, size)

    def _free(self, key: int, size: int) -> None:
        self._seen.discard(key)
        self.live -= size


class _CountingMode(TorchDispatchMode):
    def __init__(self, channels_first: bool = False, fusion: FusionTrace | None = None) -> None:
        super().__init__()
        # Whether the step's activations are NCHW. Read from the workload, not from strides: the meta device's
        # convolution returns contiguous (NCHW) outputs even for channels-last inputs, where a GPU keeps NHWC.
        self.channels_first = channels_first
        self.ops: list[tuple[str, float, float]] = []
        self.memory = _LiveBytes()
        # For a compiled workload: each op with the values it reads and writes, which engine.fusion fuses.
        self.fusion = fusion

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's protocol
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.fusion is not None and self.fusion.in_forward:
            self.fusion.forward_ops += 1
        if func.is_view or func in _FREE or func._overloadpacket in (aten.detach, aten.alias):
            if func in _FREE:
                self.memory.add(_tensors(out))
            return out
        # Flattened once: this runs for every op of the step, and the trace is most of a prediction's time.
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        self.memory.add(outputs, inputs)
        packet = func._overloadpacket
        moved = float(_nbytes(inputs) + _nbytes(outputs))
        if moved == 0:
            return out
        kind = _kind(func, args, inputs, self.channels_first)
        if kind in ("depthwise", "grouped") or _grouped_backward(func, args):
            flops = _grouped_conv_flops(func, args, out)
        else:
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0.0
        if kind in ("memory", "norm"):
            # Elementwise work is priced by bytes; its FLOPs would only mislead the roofline.
            flops = 0.0
        elif kind == "serial":
            flops = float(inputs[0].shape[0] * inputs[0].shape[1])
        self.ops.append((kind, flops, moved))
        if self.fusion is not None:
            self.fusion.record(kind, flops, moved, inputs, outputs)
            if func is aten.convolution.default and self.fusion.in_forward:
                self.fusion.record_conv(args[1], args[8], flops)
        if (self.channels_first and kind == "tensor" and func in _CONV
                and (layout := _layout_bytes(func, args, out)) > 0):
            self.ops.append(("layout", 0.0, layout))
            if self.fusion is not None:
                self.fusion.record("layout", 0.0, layout, (), ())
        return out


# CUDA autocast's op lists (torch.amp docs, "CUDA Ops that can autocast to float16" and "... to float32"), by the
# names the torch functions and Tensor methods carry. einsum is autocast through the bmm it runs.
_AUTOCAST_LOWER = frozenset({
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "linear", "matmul",
    "__matmul__", "__rmatmul__", "mm", "mv", "bmm", "baddbmm", "addmm", "addmv", "addr", "addbmm", "chain_matmul",
    "multi_dot", "prelu", "einsum", "scaled_dot_product_attention",
})
_AUTOCAST_FP32 = frozenset({
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits", "cosh",
    "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv",
    "exp", "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log", "log10", "log1p",
    "log2", "margin_ranking_loss", "mse_loss", "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "pdist",
    "poisson_nll_loss", "pow", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss", "softmin",
    "softplus", "renorm", "tan", "triplet_margin_loss",
})
# The ops of the docs' fp32 list that CUDA's autocast does not cast (autocast_mode.cpp's fp32_set_opt_dtype and
# fp32_append_dtype policies): it passes dtype=float32 instead, and the kernel reads the 16-bit input and writes fp32.
# An fp16 softmax asked for fp32 output is one kernel on a GPU (half_to_float); the meta device would cast first, so
# it is traced as that kernel. A bf16 one is cast first on a GPU too (aten's softmax fuses fp16 alone), so an amp-bf16
# step with such a softmax counts apart from its amp-fp16 twin (scripts/build_count_table.py). F.normalize reaches
# autocast only through the norm it takes, which then comes out in fp32, and so does the division by it. Casting
# these first would count a reduction's input three times over (ConvNeXt-V2's global response norm: 132 GB where the
# step moves 106 GB at batch 256). cross_entropy is on autocast's cast list itself, and softmin (a negation, then
# a softmax) stays traced as a cast: it reads only logits. cumsum and cumprod get dtype=float32 too, but their CUDA
# scan copies its input to fp32 first, so they are traced with the cast (_AUTOCAST_FP32). Each of these ops launches
# the kernels traced here under autocast on an H100, in fp16 and in bf16 (benchmarks/accuracy/autocast_kernels.py).
_AUTOCAST_FP32_OUTPUT = frozenset({"softmax", "log_softmax", "sum", "prod", "norm", "normalize"})


class _Autocast(TorchFunctionMode):
    """CUDA's autocast, for a trace on the meta device: the listed ops' floating inputs cast to the lower precision
    or to fp32 before the op runs, each cast a kernel the counting mode sees. As autocast does, the lower-precision
    copy of a weight (a leaf that requires grad) is made once per autocast region and kept until it ends (in
    training, the graph keeps what backward needs)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        # (source, its cast) by the source's id. The source is held, as CUDA's autocast holds a weak reference that
        # keeps its address: under no_grad a weight's view is such a leaf too, freed after its op, and Python would
        # give its id, and so its cast of another shape, to the next tensor made in the region.
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __exit__(self, *exc: object) -> None:
        self.cache.clear()
        super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _AUTOCAST_LOWER:
            args, kwargs = self._cast((args, kwargs), torch.float32, self.dtype)
        elif name in _AUTOCAST_FP32:
            args, kwargs = self._cast((args, kwargs), self.dtype, torch.float32)
        elif (name in _AUTOCAST_FP32_OUTPUT and args and isinstance(args[0], torch.Tensor)
              and args[0].dtype == self.dtype and kwargs.get("dtype") is None):
            return _fp32_output(func, name, args, kwargs)
        return func(*args, **kwargs)

    def _cast(self, values: Any, source: torch.dtype, dtype: torch.dtype) -> Any:
        flat, spec = tree_flatten(values)
        return tree_unflatten([self._cast_one(v, dtype) if isinstance(v, torch.Tensor) and v.dtype == source else v
                               for v in flat], spec)

    def _cast_one(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if not (tensor.is_leaf and tensor.requires_grad and dtype == self.dtype):
            return tensor.to(dtype)
        if id(tensor) not in self.cache:
            self.cache[id(tensor)] = (tensor, tensor.to(dtype))
        return self.cache[id(tensor)][1]


def _fp32_output(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A 16-bit tensor's op of _AUTOCAST_FP32_OUTPUT as CUDA's autocast runs it: fp32 out, and no cast first but a bf16
    softmax's."""
    source = args[0]
    if name in ("softmax", "log_softmax") and source.dtype == torch.float16:
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if dim is not None:
            kernel = aten._softmax if name == "softmax" else aten._log_softmax
            return kernel(source, dim, True)
    if name == "normalize":
        return _normalized(*args, **kwargs)
    return func(*args, **{**kwargs, "dtype": torch.float32})


def _normalized(source: torch.Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
                out: None = None) -> torch.Tensor:
    """F.normalize under CUDA's autocast: its norm comes out in fp32, and so does the division by it."""
    return source / source.norm(p, dim, keepdim=True, dtype=torch.float32).clamp_min(eps).expand_as(source)


class _FusedAttention(TorchFunctionMode):
    """Counts scaled_dot_product_attention as the one fused kernel a GPU runs for it.

    On the meta device SDPA takes its math path: two batched matmuls around a softmax, writing and reading the
    L x S attention matrix several times. A GPU runs flash or memory-efficient attention instead, which never writes
    that matrix; counting the math path made attention-heavy models (ViTs at 384 px and up) look two to three times
    more memory-bound than they are. The memory-efficient op has meta kernels and an autograd formula, so forward
    and backward are traced as the fused op and its fused backward; an attention mask (a relative-position bias)
    is its additive bias, as on a GPU. Calls it cannot stand for (grouped-query heads, not 4-D) keep the math path.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's protocol
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            fused = _fused_attention(*args, **kwargs)
            if fused is not None:
                return fused
        return func(*args, **kwargs)


def _fused_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                     scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor | None:
    if enable_gqa or not query.dim() == key.dim() == value.dim() == 4:
        return None
    bias = attn_mask
    if bias is not None and not bias.is_floating_point():
        # As SDPA does on a GPU: a boolean mask becomes an additive bias (one elementwise kernel) first.
        bias = torch.zeros_like(bias, dtype=query.dtype).masked_fill(bias.logical_not(), float("-inf"))
    if bias is not None and bias.dtype != query.dtype:
        bias = bias.to(query.dtype)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    output, *_ = aten._scaled_dot_product_efficient_attention(query, key, value, bias, grad, dropout_p, is_causal,
                                                              scale=scale)
    return output


def _grouped_backward(func: Any, args: tuple[Any, ...]) -> bool:
    """Whether an op is the backward of a grouped, not transposed, convolution: torch's formula (flop_counter's
    conv_backward_flop) counts its weight gradient as if every input channel met every output channel, `groups` times
    its work; a CondConv's per-sample weights (groups = batch) made that hundreds of times."""
    return func is aten.convolution_backward.default and args[9] > 1 and not args[7]


def _grouped_conv_flops(func: Any, args: tuple[Any, ...], out: Any) -> float:
    """2 x output elements x kernel taps per output, for the forward and for each gradient the backward computes (a
    grouped convolution's output element meets only its group's input channels)."""
    if func is aten.convolution_backward.default:
        grad_out, weight, mask = args[0], args[2], args[10]
        taps = weight[0].numel()
        return 2.0 * grad_out.numel() * taps * sum(1 for m in mask[:2] if m)
    weight = args[1]
    return 2.0 * out.numel() * weight[0].numel()


def count_workload(workload: Workload) -> WorkloadCounts:
    """Trace one step of the workload on the meta device (no memory, no GPU) and count it."""
    return traced_counts(workload)[0]


def traced_counts(workload: Workload) -> tuple[WorkloadCounts, list[int]]:
    """The workload's counts and, for an eager step, the live bytes after each allocation of its trace (the timeline
    its peak is the largest of; empty for a compiled step, whose peak is the fused graph's)."""
    from engine.workloads import resolve_precision

    precision = resolve_precision(workload.precision)
    # The optimizer is traced apart (its first step only creates its state), on the same fp32 weights. A compiled
    # step is traced eagerly and its kernels fused afterwards (engine.fusion).
    step = make_step(workload.model_copy(update={"optimizer": "none", "compile": False}), "meta",
                     mixed_precision=_Autocast)
    fusion = FusionTrace() if workload.compile else None
    hooks = fusion.watch(step.model) if fusion is not None else []
    mode = _CountingMode(channels_first=workload.memory_format == "nchw", fusion=fusion)
    with _FusedAttention(), mode:
        result = step.run()
        alive = fusion.alive() if fusion is not None else set()
        del result  # the loss or the logits: dropped before the peak is read, as the next step would
    for hook in hooks:
        hook.remove()
    params = list(step.model.parameters())
    traced, peak, timeline = mode.ops, float(mode.memory.peak), mode.memory.timeline
    if fusion is not None:
        graph_inputs = len(params) + len(list(step.model.buffers())) + 1
        fused = fuse(fusion, alive, graph_inputs, training=workload.mode == "train")
        traced, peak, timeline = fused.ops, fused.peak_live_bytes, []
    ops = traced + _optimizer_ops(workload, step.model)
    param_bytes = float(sum(p.numel() * p.element_size() for p in params))
    buffer_bytes = float(sum(b.numel() * b.element_size() for b in step.model.buffers()))
    h, w = workload.resolution
    input_bytes = float(workload.batch_size * workload.in_chans * h * w * precision.model_dtype.itemsize
                        + workload.batch_size * 8)
    counts = WorkloadCounts.of_ops(ops, param_bytes=param_bytes, param_count=sum(p.numel() for p in params),
                                   buffer_bytes=buffer_bytes, input_bytes=input_bytes, peak_live_bytes=peak)
    return counts, timeline


def _optimizer_ops(workload: Workload, model: torch.nn.Module) -> list[tuple[str, float, float]]:
    """The ops of one optimizer step after the first (which only creates the optimizer's state), on weights shaped,
    laid out and typed as the traced model's (fp32 master weights under AMP). Made from that model rather than from
    a second build of it (half a second for a ViT-L).

    Off CUDA, torch's optimizers step one weight at a time (their single-tensor implementations), each weight's ops
    depending only on its shape, strides and dtype. So the step is traced once per kind of weight and its ops repeated,
    in the weights' order, for every weight of that kind: the same ops as a trace of the whole step, in a third of
    the time for a ResNet-50 (its meta kernels run in Python, op by op). That is how PyTorch 1.x stepped on CUDA too;
    2.x steps every weight at once (_foreach_grouped)."""
    if workload.mode != "train" or workload.optimizer == "none":
        return []
    by_kind: dict[tuple[Any, ...], list[tuple[str, float, float]]] = {}
    per_weight: list[list[tuple[str, float, float]]] = []
    elements = 0
    for weight in model.parameters():
        if not weight.requires_grad:
            continue
        kind = (weight.shape, weight.stride(), weight.dtype)
        if kind not in by_kind:
            by_kind[kind] = _one_weight_step(workload, weight)
        per_weight.append(by_kind[kind])
        elements += weight.numel()
    if workload.torch_major >= 2 and len({len(ops) for ops in per_weight}) == 1:
        return _foreach_grouped(per_weight, elements)
    return [op for ops in per_weight for op in ops]


# torch's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh): one launch takes at most 48 tensors of each
# list for a three-list update (weight, gradient, momentum buffer) and at most 320 blocks of 65,536 elements.
_FOREACH_TENSORS = 48
_FOREACH_ELEMENTS = 320 * 65536


def _foreach_grouped(per_weight: list[list[tuple[str, float, float]]],
                     elements: int) -> list[tuple[str, float, float]]:
    """The optimizer step as PyTorch 2.x runs it on CUDA (foreach, its default): each of the per-weight update's
    ops becomes one multi-tensor kernel over all weights, launched as often as its tensors and elements need. The
    bytes and FLOPs are the per-weight ones; only the number of kernels (each paying a launch) falls."""
    launches = max(math.ceil(len(per_weight) / _FOREACH_TENSORS), math.ceil(elements / _FOREACH_ELEMENTS))
    grouped: list[tuple[str, float, float]] = []
    for position in range(len(per_weight[0])):
        kind = per_weight[0][position][0]
        flops = sum(ops[position][1] for ops in per_weight)
        moved = sum(ops[position][2] for ops in per_weight)
        grouped.extend([(kind, flops / launches, moved / launches)] * launches)
    return grouped


def _one_weight_step(workload: Workload, weight: torch.Tensor) -> list[tuple[str, float, float]]:
    """The ops of the optimizer's second step on one weight like `weight`."""
    param = torch.nn.Parameter(torch.empty_like(weight))
    param.grad = torch.empty_like(param)
    optimizer = make_optimizer(workload, [param])
    assert optimizer is not None
    optimizer.step()
    mode = _CountingMode()
    with mode:
        optimizer.step()
    return mode.ops
