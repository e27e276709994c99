"""A compiled step's kernels (`Workload.compile`), from its eager trace: what torch.compile's inductor fuses.

Inductor (torch.compile's default backend, in its default mode) leaves convolutions, matmuls and attention to the
libraries (cuDNN, cuBLAS, flash attention) and generates its own kernels for everything else, each running a chain
of elementwise, normalisation and reduction ops in one pass: it reads what the chain takes from outside once, writes
only what is used after it, and keeps the values passed along the chain in registers. From the eager trace
(engine.counting), op by op in the order they ran:

- A memory-bound op of the compiled region joins the group of each op whose output it reads, while that group is
  open; ops reading from several open groups merge them. A group closes once a library kernel, or an op outside the
  compiled region, reads one of its outputs: anything that depends on that kernel could join it only by making a
  cycle. So conv -> BatchNorm -> ReLU is the convolution and one kernel reading its output and writing the ReLU's;
  an add -> LayerNorm -> cast before a matmul is one kernel.
- A group is one kernel, memory-bound and dense (inductor tiles a transpose so both sides are coalesced), of its own
  kind, 'fused' (the roofline prices it at the share of DRAM peak inductor's kernels reach): its bytes
  are the values its ops read that it did not produce, each once, and the values it produced that are read after it
  or are still alive when the step ends (its result, a weight's gradient). What only its own ops read never reaches
  memory. A value is one write of a storage, so an in-place op reads one value and writes the next.
- Library kernels keep their counts. Inductor runs a graph's convolutions channels-last when its layout heuristics
  say so (`layout_optimized`): then cuDNN's NCHW conversions around them ('layout' ops) are gone, and a depthwise
  convolution goes to cuDNN as a channels-last workload's does ('grouped').
- PyTorch's NCHW bilinear and bicubic resizes ('serial': a few threads looping over the batch) are lowered to
  inductor's own kernels, so they are memory-bound ops like any other.

Only the model is compiled, as timm's benchmark compiles it: its forward and, in training, its backward are each a
graph of their own, and no group spans the two; the loss and the optimizer run eagerly. Nothing here is fitted: the
rule is inductor's, the prices the roofline's (engine.estimators.roofline, Efficiency.fused_memory).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# Op kinds inductor writes kernels of its own for (engine.counts.OpKind): everything memory-bound.
FUSIBLE_KINDS = frozenset({"memory", "norm", "strided", "serial"})
EAGER = -1  # the region of an op outside the compiled model (the loss, the optimizer)

# Inductor's measured channels-last speed-up of each kind of convolution (GraphLowering.decide_layout_opt, inference:
# "average benchmarked channels last speedup / slowdown, < 1 is speedup"), by which it weighs a graph's convolution
# FLOPs to decide its layout.
_CHANNELS_LAST_COST = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
# ... and the ops per convolution above which it leaves the layout alone ("only a few conv").
_NODES_PER_CONV = 300


@dataclass(frozen=True)
class Conv:
    """A forward convolution of the compiled graph, as inductor's layout heuristics see it."""

    out_channels: int
    in_per_group: int
    kernel_h: int
    groups: int
    flops: float

    def layout_class(self) -> str:
        if self.groups > 1 and self.in_per_group > 1:
            return "grouped"
        if self.out_channels <= 64 and self.in_per_group <= 64:
            return "small"
        if self.out_channels * 2 <= self.in_per_group and self.kernel_h > 1:
            return "in_out"
        return "default"


def layout_optimized(convs: Sequence[Conv], graph_nodes: int, training: bool) -> bool:
    """Whether inductor runs the graph's convolutions channels-last (GraphLowering.decide_layout_opt on a CUDA
    graph): never for a graph with no convolutions or few among many ops; in inference when its FLOPs weighted by
    each kind's channels-last cost come to no more than they are; in training unless a convolution is grouped with
    more than one input channel per group or has at most half as many outputs as inputs, or every one is small."""
    if not convs or graph_nodes >= _NODES_PER_CONV * len(convs):
        return False
    classes = [conv.layout_class() for conv in convs]
    if not training:
        weighted = sum(conv.flops * _CHANNELS_LAST_COST[kind] for conv, kind in zip(convs, classes, strict=True))
        return weighted <= sum(conv.flops for conv in convs)
    return "grouped" not in classes and "in_out" not in classes and set(classes) != {"small"}


@dataclass
class TracedOp:
    """One counted op with the values it read and wrote (value id -> bytes)."""

    kind: str
    flops: float
    moved: float
    reads: dict[int, float]
    writes: dict[int, float]
    region: int


class _Values:
    """An id per write of a storage, the storages held weakly (the trace frees tensors as the step drops them)."""

    def __init__(self) -> None:
        self._current: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._storages: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._ids = itertools.count()
        # value -> (its storage's id, the storage's bytes), for the values the step wrote (not its weights or batch)
        self.storage_of: dict[int, tuple[int, float]] = {}

    def read(self, tensors: Sequence[torch.Tensor]) -> dict[int, float]:
        """The values `tensors` hold, with the bytes an op reads of each: a view's, up to its storage's."""
        found: dict[int, float] = {}
        for tensor in tensors:
            storage = tensor.untyped_storage()
            if storage not in self._current:
                self._current[storage] = next(self._ids)  # made before the trace: a weight, the batch
            value = self._current[storage]
            found[value] = min(found.get(value, 0.0) + _view_bytes(tensor), float(storage.nbytes()))
        return found

    def write(self, tensors: Sequence[torch.Tensor]) -> dict[int, float]:
        """New values for the storages `tensors` write, with their bytes."""
        written: dict[int, float] = {}
        for tensor in tensors:
            storage = tensor.untyped_storage()
            if storage not in self._storages:
                self._storages[storage] = next(self._ids)
            value = self._current[storage] = next(self._ids)
            written[value] = float(min(_view_bytes(tensor), storage.nbytes()))
            self.storage_of[value] = (self._storages[storage], float(storage.nbytes()))
        return written

    def alive(self) -> set[int]:
        """The current values of the storages something still holds."""
        return set(self._current.values())


def _view_bytes(tensor: torch.Tensor) -> float:
    return float(tensor.numel() * tensor.element_size())


@dataclass
class FusionTrace:
    """What the fusion rule needs of a trace: the ops with their values, which region each ran in, the forward
    graph's convolutions and op count (for inductor's layout decision)."""

    ops: list[TracedOp] = field(default_factory=list)
    convs: list[Conv] = field(default_factory=list)
    forward_ops: int = 0  # every op the compiled forward dispatched, views included: its graph's nodes
    region: int = EAGER
    _regions: int = 0
    _values: _Values = field(default_factory=_Values)

    @property
    def in_forward(self) -> bool:
        return self.region == 0

    def record(self, kind: str, flops: float, moved: float, inputs: Sequence[torch.Tensor],
               outputs: Sequence[torch.Tensor]) -> None:
        reads = self._values.read(inputs)
        self.ops.append(TracedOp(kind, flops, moved, reads, self._values.write(outputs), self.region))

    def record_conv(self, weight: torch.Tensor, groups: int, flops: float) -> None:
        self.convs.append(Conv(out_channels=weight.shape[0], in_per_group=weight.shape[1], kernel_h=weight.shape[2],
                               groups=groups, flops=flops))

    def watch(self, model: torch.nn.Module) -> list[Any]:
        """Hooks on `model` that mark its forward, and its backward once the gradient of its output arrives, as
        compiled regions. Returns their handles."""

        def forward_starts(module: Any, args: Any) -> None:
            self._enter()

        def forward_ends(module: Any, args: Any, output: Any) -> None:
            self.region = EAGER
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda grad: self._enter())

        return [model.register_forward_pre_hook(forward_starts), model.register_forward_hook(forward_ends)]

    def alive(self) -> set[int]:
        return self._values.alive()

    def storage_of(self) -> dict[int, tuple[int, float]]:
        return self._values.storage_of

    def _enter(self) -> None:
        self.region = self._regions
        self._regions += 1


@dataclass(frozen=True)
class Fused:
    """A compiled step's kernels as (kind, FLOPs, bytes), and the peak bytes of the tensors it allocates: a value
    fused away is never allocated."""

    ops: list[tuple[str, float, float]]
    peak_live_bytes: float


def fuse(trace: FusionTrace, alive: set[int], graph_inputs: int, training: bool) -> Fused:
    """The compiled step, from the trace of its eager ops; `alive` are the values still held when the step ended,
    `graph_inputs` the forward graph's inputs (weights, buffers, the batch)."""
    channels_last = layout_optimized(trace.convs, trace.forward_ops + graph_inputs, training)
    ops = [op for op in trace.ops if not (channels_last and op.kind == "layout" and op.region != EAGER)]
    group_of = _groups(ops)
    members: dict[int, list[int]] = {}
    for index, group in group_of.items():
        members.setdefault(group, []).append(index)
    producer = {value: index for index, op in enumerate(ops) for value in op.writes}
    readers: dict[int, set[int]] = {}
    for index, op in enumerate(ops):
        for value in op.reads:
            readers.setdefault(value, set()).add(index)

    def used_after(value: int, index: int) -> bool:
        own = group_of.get(index, -1 - index)
        return value in alive or any(group_of.get(reader, -1 - reader) != own for reader in readers.get(value, ()))

    kernels: list[tuple[str, float, float]] = []
    # Where each allocated value lives: from the op that writes it (a fused kernel runs at its last op) to its last
    # reader, or to the end when the step ends holding it.
    lives: list[tuple[int, int, int]] = []  # (value, first, last op index)
    end = len(ops)
    for index, op in enumerate(ops):
        fused_into = group_of.get(index)
        if fused_into is None:
            kind = "grouped" if channels_last and op.kind == "depthwise" and op.region != EAGER else op.kind
            kernels.append((kind, op.flops, op.moved))
            runs_at, written = index, op.writes
        elif members[fused_into][0] == index:
            inputs, written = _group_values(ops, members[fused_into], group_of, producer, used_after)
            kernels.append(("fused", 0.0, sum(inputs.values()) + sum(written.values())))
            runs_at = members[fused_into][-1]
        else:
            continue
        for value in written:
            last = end if value in alive else max(readers.get(value, ()), default=runs_at)
            lives.append((value, runs_at, max(last, runs_at)))
    return Fused(kernels, _peak(lives, trace.storage_of()))


def _group_values(ops: Sequence[TracedOp], members: list[int], group_of: dict[int, int], producer: dict[int, int],
                  used_after: Callable[[int, int], bool]) -> tuple[dict[int, float], dict[int, float]]:
    """What one fused kernel reads from outside it, once each, and the values it writes that are used after it,
    each with its bytes."""
    group = group_of[members[0]]
    inputs: dict[int, float] = {}
    outputs: dict[int, float] = {}
    for index in members:
        op = ops[index]
        for value, size in op.reads.items():
            if group_of.get(producer.get(value, -1)) != group:
                inputs[value] = max(inputs.get(value, 0.0), size)
        outputs.update({value: size for value, size in op.writes.items() if used_after(value, index)})
    return inputs, outputs


def _peak(lives: Sequence[tuple[int, int, int]], storage_of: dict[int, tuple[int, float]]) -> float:
    """The most bytes allocated at once, a storage written more than once (in place) counted once over its values'
    lives."""
    spans: dict[int, tuple[int, int, float]] = {}
    for value, first, last in lives:
        storage, size = storage_of[value]
        start, stop, _ = spans.get(storage, (first, last, size))
        spans[storage] = (min(start, first), max(stop, last), size)
    events = sorted([(start, size) for start, _, size in spans.values()]
                    + [(stop + 0.5, -size) for _, stop, size in spans.values()])
    live = peak = 0.0
    for _, change in events:
        live += change
        peak = max(peak, live)
    return peak


def _groups(ops: Sequence[TracedOp]) -> dict[int, int]:
    """The fused group of each fusible op, by op index (module docstring)."""
    parent: list[int] = []

    def root(group: int) -> int:
        while parent[group] != group:
            parent[group] = parent[parent[group]]
            group = parent[group]
        return group

    producer_group: dict[int, int] = {}  # value -> the group that wrote it
    region_of: dict[int, int] = {}
    closed: set[int] = set()
    group_of: dict[int, int] = {}
    for index, op in enumerate(ops):
        sources = {root(producer_group[value]) for value in op.reads if value in producer_group}
        if op.kind in FUSIBLE_KINDS and op.region != EAGER:
            joinable = sorted(group for group in sources if group not in closed and region_of[group] == op.region)
            if joinable:
                group = joinable[0]
                for other in joinable[1:]:
                    parent[other] = group
            else:
                group = len(parent)
                parent.append(group)
                region_of[group] = op.region
            group_of[index] = group
            producer_group.update(dict.fromkeys(op.writes, group))
        else:
            closed |= sources
    return {index: root(group) for index, group in group_of.items()}
