"""Memory and OOM without a GPU: the peak of what the traced step keeps alive (autocast's weight copies and fp32
gradients included), plus what the trace does not hold (the weights, the optimizer's state, the allocator's slack and
the CUDA context), and the OOM verdict every estimator gives from it."""

from __future__ import annotations

import pytest

from understudy.catalog import catalog
from understudy.results import HostInfo
from understudy.workload import Workload
# counts_for (count_workload, kept per workload): tests of one workload share one trace of it, across modules.
from engine.count_lookup import counts_for
from engine.counts import WorkloadCounts
from engine.estimators.analytic import AnalyticEstimator
from engine.estimators.memory import GIB, AllocatorModel, predict_memory

# One million fp32 weights, 1 GiB traced at the peak.
COUNTS = WorkloadCounts(param_count=1_000_000, param_bytes=4e6, buffer_bytes=0.0, input_bytes=0.0,
                        peak_live_bytes=float(GIB))
MODEL = AllocatorModel(inference_slack=0.1, fixed_gb=0.5, training_slack=0.05)


def test_sgd_training_holds_the_weights_one_momentum_buffer_and_the_traced_peak_with_slack() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="train", optimizer="sgd"), MODEL)
    assert memory.weights_gb == pytest.approx(4e6 / GIB)
    assert memory.optimizer_gb == pytest.approx(4e6 / GIB)
    assert memory.activations_gb == pytest.approx(1.05)  # 1 GiB traced, the training step's 5 % slack
    assert memory.total_gb == pytest.approx(8e6 / GIB + 1.05 + 0.5)


def test_inference_holds_no_optimizer_state_and_takes_the_inference_slack() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="infer"), MODEL)
    assert memory.optimizer_gb == 0
    assert memory.activations_gb == pytest.approx(1.1)  # 1 GiB traced, 10 % slack (cuDNN's workspaces beside it)
    assert memory.total_gb == pytest.approx(4e6 / GIB + 1.1 + 0.5)


def test_adamw_keeps_two_copies_of_the_weights() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="train", precision="fp32", optimizer="adamw"),
                            MODEL)
    assert memory.optimizer_gb == pytest.approx(8e6 / GIB)


def test_amp_traces_hold_autocasts_fp16_weight_copies_through_the_forward() -> None:
    def peak(precision: str) -> float:
        workload = Workload(model="vit_base_patch16_224", mode="infer", batch_size=1, precision=precision)  # type: ignore[arg-type]
        return counts_for(workload).peak_live_bytes

    # At batch 1 the weights dominate: pure fp16 holds no copies, AMP one 2-byte copy of each of the 86.6 M weights
    # that feed a matmul (all but the position embedding and the LayerNorms').
    assert peak("amp-fp16") - peak("fp16") == pytest.approx(2 * 86.6e6, rel=0.02)


def test_the_trace_peak_grows_with_the_batch_and_training_keeps_more_alive_than_inference() -> None:
    def peak(mode: str, batch: int) -> float:
        return counts_for(Workload(model="resnet18", mode=mode, batch_size=batch)).peak_live_bytes  # type: ignore[arg-type]

    assert peak("infer", 16) == pytest.approx(2 * peak("infer", 8), rel=0.01)
    assert peak("train", 32) > 3 * peak("infer", 32)


def test_the_inference_peak_is_at_least_the_largest_activation() -> None:
    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=8, precision="fp32"))
    assert counts.peak_live_bytes >= 8 * 64 * 112 * 112 * 4  # the stem's output


def test_analytic_says_oom_for_vit_large_training_at_batch_256_on_a_12_gb_card() -> None:
    # About 50 GB predicted: even the low end of its band is far over 12.
    workload = Workload(model="vit_large_patch16_224", mode="train", batch_size=256)
    result = AnalyticEstimator().estimate(workload, catalog().get("rtx-3060-12-gb"), HostInfo(), None)
    assert result.status == "oom"
    assert result.memory is not None and result.memory.verdict == "oom"
    assert result.memory.capacity_gb == 12 and result.memory.low_gb > 12
    assert f"needs about {result.memory.peak_gb:.1f} GB (at least {result.memory.low_gb:.1f})" in (result.error or "")


def test_a_small_workload_fits_the_same_card() -> None:
    result = AnalyticEstimator().estimate(Workload(model="resnet18", batch_size=32), catalog().get("rtx-3060-12-gb"),
                                          HostInfo(), None)
    assert result.status == "done"
