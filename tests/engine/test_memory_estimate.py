"""Memory and OOM without a GPU: the peak of what the traced step keeps alive, plus what the trace does not hold
(fp32 weights and gradients under AMP, autocast's weight copies, the optimizer's state, the allocator's slack and the
CUDA context), and the OOM verdict every estimator gives from it."""

from __future__ import annotations

import pytest

from understudy.catalog import catalog
from understudy.results import HostInfo
from understudy.workload import Workload
# counts_for (count_workload, kept per workload): tests of one workload share one trace of it, across modules.
from engine.counting import WorkloadCounts, counts_for
from engine.estimators.analytic import AnalyticEstimator
from engine.estimators.memory import GIB, AllocatorModel, predict_memory

COUNTS = WorkloadCounts(param_count=1_000_000, buffer_bytes=0.0, input_bytes=0.0, peak_live_bytes=float(GIB))
MODEL = AllocatorModel(activation_slack=0.1, fixed_gb=0.5)


def test_amp_training_holds_fp32_weights_momentum_weight_copies_and_fp32_gradients() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="train", optimizer="sgd"), MODEL)
    assert memory.weights_gb == pytest.approx(4e6 / GIB)  # fp32 weights
    assert memory.optimizer_gb == pytest.approx(4e6 / GIB)  # one momentum buffer per weight
    # 1 GiB traced, 10 % slack, plus the fp16 weight copies (2 B) and the fp32-over-fp16 gradients (2 B more).
    assert memory.activations_gb == pytest.approx(1.1 + 4e6 / GIB)
    assert memory.total_gb == pytest.approx(12e6 / GIB + 1.1 + 0.5)


def test_inference_holds_no_optimizer_state_and_pure_fp16_no_copies() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="infer", precision="fp16"), MODEL)
    assert memory.optimizer_gb == 0
    assert memory.weights_gb == pytest.approx(2e6 / GIB)
    assert memory.activations_gb == pytest.approx(1.1)


def test_adamw_keeps_two_copies_of_the_weights() -> None:
    memory = predict_memory(COUNTS, Workload(model="resnet18", mode="train", precision="fp32", optimizer="adamw"),
                            MODEL)
    assert memory.optimizer_gb == pytest.approx(8e6 / GIB)


def test_the_trace_peak_grows_with_the_batch_and_training_keeps_more_alive_than_inference() -> None:
    def peak(mode: str, batch: int) -> float:
        return counts_for(Workload(model="resnet18", mode=mode, batch_size=batch)).peak_live_bytes  # type: ignore[arg-type]

    assert peak("infer", 16) == pytest.approx(2 * peak("infer", 8), rel=0.01)
    assert peak("train", 32) > 3 * peak("infer", 32)


def test_the_inference_peak_is_at_least_the_largest_activation() -> None:
    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=8, precision="fp32"))
    assert counts.peak_live_bytes >= 8 * 64 * 112 * 112 * 4  # the stem's output


def test_analytic_says_oom_for_vit_large_training_at_batch_256_on_a_12_gb_card() -> None:
    workload = Workload(model="vit_large_patch16_224", mode="train", batch_size=256)
    result = AnalyticEstimator().estimate(workload, catalog().get("rtx-3060-12-gb"), HostInfo(), None)
    assert result.status == "oom"
    assert "GB" in (result.error or "") and result.details["predicted_peak_gb"] > 12


def test_a_small_workload_fits_the_same_card() -> None:
    result = AnalyticEstimator().estimate(Workload(model="resnet18", batch_size=32), catalog().get("rtx-3060-12-gb"),
                                          HostInfo(), None)
    assert result.status == "done"
