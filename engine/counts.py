"""A workload's counts: every kernel of one step with its kind, FLOPs and bytes, its weights and its peak of live
bytes. A trace on the meta device makes them (engine.counting), the shipped count table keeps them
(engine.count_table), the estimators price them; engine.count_lookup says where a prediction gets them.

This module imports no torch, so counts read from the table cost no torch import.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


# What unit limits a kernel (engine.estimators.roofline prices each kind). 'fused': a kernel torch.compile's inductor
# generates for a chain of memory-bound ops (engine.fusion); only a compiled step has them.
OpKind = Literal["tensor", "matmul32", "depthwise", "grouped", "memory", "norm", "layout", "strided", "serial",
                 "fused"]
KINDS: tuple[OpKind, ...] = ("tensor", "matmul32", "depthwise", "grouped", "memory", "norm", "layout", "strided",
                             "serial", "fused")


@dataclass
class KindTotals:
    flops: float = 0.0
    bytes: float = 0.0
    ops: int = 0


@dataclass
class WorkloadCounts:
    """Per-kind totals and the per-op list of one step."""

    kinds: dict[str, KindTotals] = field(default_factory=dict)
    # (kind, flops, bytes) per kernel, kept for the roofline (max of compute and memory time is per op).
    ops: list[tuple[str, float, float]] = field(default_factory=list)
    param_bytes: float = 0.0  # the weights in the model's dtype (fp32 under AMP)
    param_count: int = 0
    buffer_bytes: float = 0.0  # batch-norm statistics and other buffers
    input_bytes: float = 0.0  # the batch (and labels) the step reads
    # Peak bytes of the tensors the step itself allocated (activations, saved activations, gradients), alive at once.
    peak_live_bytes: float = 0.0

    @classmethod
    def of_ops(cls, ops: list[tuple[str, float, float]], **fields: Any) -> WorkloadCounts:
        """Counts of these kernels, with their per-kind totals."""
        totals: dict[str, KindTotals] = defaultdict(KindTotals)
        for kind, flops, moved in ops:
            totals[kind].flops += flops
            totals[kind].bytes += moved
            totals[kind].ops += 1
        return cls(kinds=dict(totals), ops=ops, **fields)

    def to_json(self) -> dict[str, Any]:
        return {
            "kinds": {k: asdict(v) for k, v in self.kinds.items()},
            "ops": self.ops,
            "param_bytes": self.param_bytes,
            "param_count": self.param_count,
            "buffer_bytes": self.buffer_bytes,
            "input_bytes": self.input_bytes,
            "peak_live_bytes": self.peak_live_bytes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadCounts:
        return cls(
            kinds={k: KindTotals(**v) for k, v in data["kinds"].items()},
            ops=[tuple(op) for op in data["ops"]],
            param_bytes=data["param_bytes"],
            param_count=int(data.get("param_count", 0)),
            buffer_bytes=float(data.get("buffer_bytes", 0.0)),
            input_bytes=float(data.get("input_bytes", 0.0)),
            peak_live_bytes=float(data.get("peak_live_bytes", 0.0)),
        )
