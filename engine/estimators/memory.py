"""A workload's peak GPU memory, predicted from its meta-device trace, and the memory verdict every estimator gives.

The trace (engine.counting) yields the peak bytes of what the step allocates: activations, the activations saved for
backward, gradients and, under AMP, autocast's low-precision copies of the weights, each in the dtype autocast gives
it. What the trace does not hold is added from the workload:

- the weights and buffers, which exist before the step;
- the optimizer's state (SGD momentum: one copy of the weights; AdamW: two);
- the caching allocator's slack over the activations (block rounding, fragmentation, cuDNN's workspaces), and a fixed
  amount for the CUDA context and the libraries' handles, neither of which PyTorch counts as allocated.

The slack differs by mode. An inference step's peak is one or two activations and whatever workspace cuDNN's
benchmark mode takes beside them, which the trace cannot see; a training step's peak is the saved activations and
the gradients, large long-lived blocks the trace holds exactly (the H200's AMP training steps allocate 1.01-1.04x
the traced peak beyond the weights and momentum), so little beyond the allocator's rounding is left to add.

The inference constants were chosen on the OOM back-off rows of timm's RTX 3090 inference files and are reported on the
RTX 4090's; the training slack on half of the models of the RTX 3090 training file, reported on the other half
(benchmarks/accuracy/memory.py, benchmarks/accuracy/memory.json). The point prediction gets both back-off facts right
for about 60 % of the inference rows (84 % of the training rows of the models its slack was not chosen on); the H200
itself, its allocator capped at 24 GiB and running today's torch and cuDNN, reproduces both for 48-54 % of those it
ran (benchmarks/accuracy/memory_peaks.py): what fit on the card then depended on that day's software (cuDNN's
benchmark-mode workspaces, the allocator's fragmentation) as much as on the model. So the verdict keeps a margin: the
predicted peak's band (understudy.bands.MemoryMargin, chosen on the same rows) against the card's memory (nominal GB
read as GiB: a "24 GB" card has 24 GiB) is `fits` below it, `tight` across it and `oom` only wholly above it; 0-0.7 %
of the rows timm ran are called oom, and 80-92 % of the batches it backed off from tight or oom.
"""

from __future__ import annotations

from dataclasses import dataclass

from understudy.bands import BandModel, band_model
from understudy.catalog import TargetSpec
from understudy.results import MemoryVerdict
from understudy.workload import Workload
from engine.counts import WorkloadCounts

GIB = 1024**3
OPTIMIZER_COPIES = {"none": 0, "sgd": 1, "sgd-nesterov": 1, "adamw": 2}


@dataclass(frozen=True)
class AllocatorModel:
    inference_slack: float  # allocator slack and workspaces, as a share of an inference step's traced peak
    fixed_gb: float  # CUDA context and library handles (GiB)
    training_slack: float  # the same for a training step

    def slack(self, mode: str) -> float:
        return self.training_slack if mode == "train" else self.inference_slack


ALLOCATOR = AllocatorModel(inference_slack=0.2, fixed_gb=1.0, training_slack=0.08)


@dataclass(frozen=True)
class MemoryEstimate:
    weights_gb: float
    optimizer_gb: float
    activations_gb: float
    overhead_gb: float

    @property
    def total_gb(self) -> float:
        return self.weights_gb + self.optimizer_gb + self.activations_gb + self.overhead_gb

    def parts(self) -> dict[str, float]:
        return {"weights": round(self.weights_gb, 3), "optimizer": round(self.optimizer_gb, 3),
                "activations": round(self.activations_gb, 3), "overhead": round(self.overhead_gb, 3)}


def predict_memory(counts: WorkloadCounts, workload: Workload, model: AllocatorModel = ALLOCATOR) -> MemoryEstimate:
    optimizer = counts.param_bytes * OPTIMIZER_COPIES[workload.optimizer] if workload.mode == "train" else 0
    activations = counts.peak_live_bytes * (1 + model.slack(workload.mode))
    return MemoryEstimate(
        weights_gb=(counts.param_bytes + counts.buffer_bytes + counts.input_bytes) / GIB,
        optimizer_gb=optimizer / GIB,
        activations_gb=activations / GIB,
        overhead_gb=model.fixed_gb,
    )


def verdict(estimate: MemoryEstimate, workload: Workload, target: TargetSpec,
            bands: BandModel | None = None) -> MemoryVerdict:
    """fits, tight or oom: the predicted peak's band (understudy.bands.BandModel.memory_band; `bands`, else the
    shipped model) against the target's memory. Only a workload whose band lies wholly above the capacity is oom."""
    peak = estimate.total_gb
    low, high = (bands or band_model()).memory_band(peak, workload.mode)
    capacity = target.memory_size_gb
    fit = "oom" if low > capacity else "tight" if high > capacity else "fits"
    return MemoryVerdict(verdict=fit, peak_gb=round(peak, 3), low_gb=round(low, 3), high_gb=round(high, 3),
                         capacity_gb=capacity, parts_gb=estimate.parts())
