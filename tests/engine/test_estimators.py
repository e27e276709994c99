"""The estimators besides `spec`: `analytic` (counted on the meta device, no GPU) on a few timm models, the
counting it rests on, and the ratio estimators `flops` and `hostaware` on the host's own GPU."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

import pytest
from tests.fakes import done_measurement, h200_host

from understudy.catalog import TargetSpec, catalog
from understudy.errors import UnderstudyError, UnknownEstimator
from understudy.results import HostInfo
from understudy.workload import Workload
# counts_for (count_workload, kept per workload): tests of one workload share one trace of it, across modules.
from engine.count_lookup import counts_for
from engine.estimators import ESTIMATORS, get_estimator
from engine.estimators.analytic import AnalyticEstimator

SMALL_MODELS = ["resnet18", "test_vit", "mobilenetv3_small_050"]
NO_GPU = HostInfo()


def analytic_ms(gpu: str, **workload: object) -> float:
    result = AnalyticEstimator().estimate(Workload.model_validate(workload), catalog().get(gpu), NO_GPU, None)
    assert result.status == "done" and result.latency_ms is not None
    return result.latency_ms


def tensor_flops(workload: Workload) -> float:
    kinds = counts_for(workload).kinds
    return sum(kinds[k].flops for k in ("tensor", "matmul32") if k in kinds)


# analytic ---------------------------------------------------------------------------------------------------------


def test_analytic_needs_no_gpu_and_no_measurement() -> None:
    estimator = AnalyticEstimator()
    assert estimator.needs_gpu is False
    assert estimator.plan(Workload(model="resnet18"), catalog().get("t4"), NO_GPU) is None


@pytest.mark.parametrize("model", SMALL_MODELS)
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_analytic_predicts_a_plausible_time_for_small_timm_models(model: str, mode: str) -> None:
    latency = analytic_ms("rtx-3090", model=model, mode=mode)
    assert math.isfinite(latency) and 0.1 < latency < 1000


@pytest.mark.parametrize("model", SMALL_MODELS)
def test_analytic_predicts_a_faster_gpu_faster(model: str) -> None:
    assert analytic_ms("rtx-4090", model=model) < analytic_ms("rtx-3090", model=model) < analytic_ms(
        "rtx-3060", model=model)


@pytest.mark.parametrize("model", SMALL_MODELS)
def test_analytic_inference_is_faster_than_training(model: str) -> None:
    assert analytic_ms("t4", model=model, mode="infer") < analytic_ms("t4", model=model, mode="train")


def test_analytic_time_grows_with_the_batch_but_less_than_linearly_for_a_convnet() -> None:
    # Each kernel carries a fixed cost, so doubling the batch less than doubles the time.
    ratio = analytic_ms("rtx-3090", model="resnet18", batch_size=64) / analytic_ms("rtx-3090", model="resnet18")
    assert 1.0 < ratio < 2.0


def test_analytic_fp32_convnet_is_slower_than_mixed_precision() -> None:
    assert analytic_ms("rtx-3090", model="resnet18", precision="fp32") > analytic_ms("rtx-3090", model="resnet18")


def test_analytic_class_times_add_up_to_the_prediction() -> None:
    result = AnalyticEstimator().estimate(Workload(model="test_vit"), catalog().get("l4"), NO_GPU, None)
    assert sum(result.details["class_ms"].values()) == pytest.approx(result.latency_ms, abs=1e-3)
    assert set(result.details["class_ms"]) == {"tensor", "simt", "other"}


def test_analytic_ignores_the_host() -> None:
    workload, gpu = Workload(model="resnet18"), catalog().get("rtx-4090")
    on_cpu = AnalyticEstimator().estimate(workload, gpu, NO_GPU, None)
    on_h200 = AnalyticEstimator().estimate(workload, gpu, h200_host(), None)
    assert on_cpu.latency_ms == on_h200.latency_ms


def test_analytic_uses_a_user_defined_targets_figures() -> None:
    # Enough SMs that their issue limit does not cap either bandwidth.
    slow = TargetSpec(id="slow", name="slow", sm_count=128, boost_clock_mhz=2000, memory_size_gb=8,
                      memory_bandwidth_gbps=100)
    fast = slow.model_copy(update={"memory_bandwidth_gbps": 1000.0})
    workload = Workload(model="mobilenetv3_small_050")
    slow_ms = AnalyticEstimator().estimate(workload, slow, NO_GPU, None).latency_ms
    fast_ms = AnalyticEstimator().estimate(workload, fast, NO_GPU, None).latency_ms
    assert fast_ms < slow_ms


# counting ---------------------------------------------------------------------------------------------------------


def test_resnet18_forward_counts_its_published_flops() -> None:
    # timm/torchvision: 1.82 GMACs per 224 px image.
    flops = tensor_flops(Workload(model="resnet18", mode="infer", batch_size=1, precision="fp32"))
    assert flops == pytest.approx(2 * 1.82e9, rel=0.02)


def test_training_step_counts_about_three_forward_passes() -> None:
    infer = tensor_flops(Workload(model="resnet18", mode="infer", precision="fp32"))
    train = tensor_flops(Workload(model="resnet18", mode="train", precision="fp32"))
    assert 2.8 < train / infer < 3.0  # the first convolution needs no input gradient


def test_flops_double_with_the_batch() -> None:
    one = counts_for(Workload(model="resnet18", mode="infer", batch_size=1)).kinds["tensor"].flops
    two = counts_for(Workload(model="resnet18", mode="infer", batch_size=2)).kinds["tensor"].flops
    assert two == pytest.approx(2 * one)


def test_depthwise_convolutions_are_counted_apart_from_tensor_math() -> None:
    kinds = counts_for(Workload(model="mobilenetv3_small_050", mode="infer", batch_size=1, precision="fp32")).kinds
    assert kinds["depthwise"].ops > 0 and kinds["depthwise"].flops > 0
    assert kinds["tensor"].flops > 0


@pytest.mark.parametrize(("dtype", "channels", "filter_size", "groups", "dilation", "width", "layout", "kind"), [
    ("float16", 64, 3, 64, 1, 56, "nchw", "grouped"),  # MobileNet's in half precision: cuDNN's
    ("float16", 64, 5, 64, 1, 7, "nchw", "grouped"),
    ("bfloat16", 64, 3, 64, 1, 56, "nchw", "depthwise"),  # the same in bf16 or fp32: PyTorch's own kernels
    ("float32", 64, 3, 64, 1, 56, "nchw", "depthwise"),
    ("float32", 96, 7, 96, 1, 56, "nchw", "grouped"),  # a 7 x 7 filter: PyTorch's own kernels, not slow there
    ("float16", 16, 3, 16, 1, 112, "nchw", "depthwise"),  # under 32 channels
    ("float16", 64, 3, 64, 2, 56, "nchw", "depthwise"),  # dilated
    ("float16", 64, 3, 64, 1, 5, "nchw", "depthwise"),  # under 7 wide
    ("float32", 96, 7, 96, 1, 56, "channels-last", "grouped"),  # a channels-last input: cuDNN's in any precision
    ("float32", 128, 3, 32, 1, 56, "nchw", "grouped"),  # ResNeXt's groups of 4 channels: not depthwise
])
def test_a_small_depthwise_convolution_pytorch_runs_itself_is_counted_apart_from_other_grouped_ones(
        dtype: str, channels: int, filter_size: int, groups: int, dilation: int, width: int, layout: str,
        kind: str) -> None:
    import torch

    from engine.counting import _CountingMode

    conv = torch.nn.Conv2d(channels, channels, filter_size, padding="same", groups=groups, dilation=dilation,
                           bias=False, device="meta", dtype=getattr(torch, dtype))
    x = torch.empty(2, channels, width, width, device="meta", dtype=getattr(torch, dtype), requires_grad=True)
    if layout == "channels-last":
        x = x.contiguous(memory_format=torch.channels_last)
    mode = _CountingMode(channels_first=True)
    with mode:
        conv(x).sum().backward()
    assert [k for k, _, _ in mode.ops if k in ("depthwise", "grouped", "tensor")] == [kind, kind]


def test_a_channels_last_workloads_depthwise_convolutions_are_cudnns() -> None:
    kinds = counts_for(Workload(model="mobilenetv3_small_050", mode="infer", batch_size=1, precision="fp32",
                                memory_format="nhwc")).kinds
    assert "depthwise" not in kinds and kinds["grouped"].ops > 0


def test_batch_norm_is_counted_apart_from_other_memory_bound_work_forward_and_backward() -> None:
    counts = counts_for(Workload(model="resnet18", mode="train", batch_size=2, precision="amp-bf16"))
    # resnet18's 20 BatchNorms, each once forward and once backward.
    assert counts.kinds["norm"].ops == 40 and counts.kinds["norm"].flops == 0
    assert counts.kinds["memory"].ops > 0


def test_a_grouped_convolutions_gradients_each_cost_what_its_forward_does() -> None:
    import torch

    from engine.counting import _CountingMode

    # 64 -> 64 channels in 4 groups of 16, 3 x 3, on a 2 x 64 x 8 x 8 input: each of the 2 x 64 x 8 x 8 outputs
    # meets 16 x 9 weights, 2 x 8192 x 144 = 2.36 MFLOP. Its input gradient and its weight gradient are the same
    # products again; torch's formula counts the weight gradient 4 (the groups) times over.
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, groups=4, bias=False, device="meta", dtype=torch.float16)
    x = torch.empty(2, 64, 8, 8, device="meta", dtype=torch.float16, requires_grad=True)
    mode = _CountingMode()
    with mode:
        conv(x).sum().backward()
    forward, backward = [flops for kind, flops, _ in mode.ops if kind == "tensor"]
    assert forward == 2 * 2 * 64 * 8 * 8 * 16 * 9
    assert backward == 2 * forward


def test_fp32_matmuls_run_on_the_plain_lanes_and_half_precision_on_tensor_cores() -> None:
    fp32 = counts_for(Workload(model="test_vit", mode="infer", batch_size=1, precision="fp32")).kinds
    half = counts_for(Workload(model="test_vit", mode="infer", batch_size=1, precision="amp-fp16")).kinds
    assert fp32["matmul32"].flops > fp32["tensor"].flops
    assert "matmul32" not in half


def test_elementwise_work_is_priced_by_bytes_only() -> None:
    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=1))
    memory = [op for op in counts.ops if op[0] == "memory"]
    assert memory and all(flops == 0.0 and moved > 0 for _, flops, moved in memory)


# vit_tiny: 12 blocks, each with four linear layers (qkv, proj, fc1, fc2) and its attention; plus the patch
# embedding and the head. A GPU runs the attention as one fused kernel; its math path would be two matmuls more.
VIT_TINY = dict(model="vit_tiny_patch16_224", batch_size=1, precision="amp-fp16")


def test_attention_counts_as_one_fused_kernel_per_block() -> None:
    kinds = counts_for(Workload(mode="infer", **VIT_TINY)).kinds
    assert kinds["tensor"].ops == 12 * (4 + 1) + 2
    assert kinds["tensor"].flops == pytest.approx(2 * 1.26e9, rel=0.02)  # timm: 1.26 GMACs per image


def test_fused_attention_backward_counts_as_one_kernel_per_block() -> None:
    kinds = counts_for(Workload(mode="train", optimizer="sgd", **VIT_TINY)).kinds
    forward = 12 * (4 + 1) + 2
    # Each linear layer's two gradients and the attention's one fused backward; the head's two; the patch
    # embedding's weight gradient only (its input needs none).
    backward = 12 * (4 * 2 + 1) + 2 + 1
    assert kinds["tensor"].ops == forward + backward


def test_unfused_attention_counts_the_score_matrix_its_pytorch_1_target_materialises() -> None:
    fused = counts_for(Workload(mode="infer", **VIT_TINY)).kinds
    unfused = counts_for(Workload(mode="infer", torch_major=1, **VIT_TINY)).kinds
    # Each block's attention is two matmuls (q @ k^T and its product with v) instead of one fused kernel...
    assert unfused["tensor"].ops == fused["tensor"].ops + 12
    # ...and a softmax over the 197 x 197 scores of each of 3 heads, written and read again: more memory traffic.
    assert unfused["memory"].bytes > fused["memory"].bytes + 12 * 3 * 197 * 197 * 2


def test_a_reparameterized_repvgg_runs_one_convolution_per_block() -> None:
    # RepVGG-A0: 22 blocks, each a 3x3 and a 1x1 convolution with their BatchNorms (and an identity BatchNorm where
    # the block keeps its width); folded, each block is one 3x3 convolution. The head's linear layer stays.
    plain, folded = (counts_for(Workload(model="repvgg_a0", mode="infer", batch_size=2, reparam=reparam)).kinds
                     for reparam in (False, True))
    assert plain["tensor"].ops == 2 * 22 + 1
    assert folded["tensor"].ops == 22 + 1
    # A 1x1 convolution has a ninth of its 3x3 sibling's FLOPs.
    assert folded["tensor"].flops == pytest.approx(plain["tensor"].flops * 9 / 10, rel=0.02)
    assert "norm" not in folded  # the BatchNorms folded away
    assert folded["memory"].bytes < (plain["memory"].bytes + plain["norm"].bytes) / 2


def test_pytorch_2_steps_the_optimizer_in_a_few_multi_tensor_kernels_with_the_same_traffic() -> None:
    # resnet18: 62 weights (20 convolutions, 20 batch norms' two, the head's two), 11.7 M elements; SGD with
    # momentum and weight decay updates each weight in 4 ops. PyTorch 1.x launches 4 x 62 kernels; 2.x launches each
    # of the 4 ops over 48 weights at a time: 2 launches each.
    workload = dict(model="resnet18", mode="train", batch_size=2, optimizer="sgd")
    modern, legacy = (counts_for(Workload(torch_major=major, **workload)) for major in (2, 1))
    ops = len(modern.ops)
    assert len(legacy.ops) - ops == 4 * 62 - 4 * 2
    assert legacy.kinds["memory"].bytes == pytest.approx(modern.kinds["memory"].bytes)


def test_attention_with_a_bias_or_a_boolean_mask_counts_as_one_fused_kernel() -> None:
    import torch
    import torch.nn.functional as F

    from engine.counting import _CountingMode, _FusedAttention

    query = torch.empty(2, 4, 64, 32, device="meta", dtype=torch.float16)
    bias = torch.empty(4, 64, 64, device="meta", dtype=torch.float16)  # a relative-position bias
    mask = torch.empty(64, 64, device="meta", dtype=torch.bool)
    # The boolean mask reaches the kernel as a half-precision bias of its own shape.
    for attn_mask, bias_bytes in ((bias, bias.nbytes), (mask, 64 * 64 * 2)):
        mode = _CountingMode()
        with _FusedAttention(), mode:
            F.scaled_dot_product_attention(query, query, query, attn_mask=attn_mask)
        (attention,) = [moved for kind, _, moved in mode.ops if kind == "tensor"]
        # Query, key, value, bias and output (and the kernel's 16 bytes of RNG state): the 2 x 4 x 64 x 64
        # attention matrix is never written.
        assert attention == 4 * query.nbytes + bias_bytes + 16


def test_counts_survive_a_json_round_trip() -> None:
    from engine.counts import WorkloadCounts

    counts = counts_for(Workload(model="test_vit", mode="infer", batch_size=2))
    again = WorkloadCounts.from_json(counts.to_json())
    assert again.ops == counts.ops and again.param_bytes == counts.param_bytes


def test_mixed_precision_training_moves_more_bytes_than_pure_half_precision() -> None:
    amp = counts_for(Workload(model="resnet18", batch_size=1, precision="amp-fp16")).kinds["memory"].bytes
    half = counts_for(Workload(model="resnet18", batch_size=1, precision="fp16")).kinds["memory"].bytes
    assert amp > half


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-nesterov", "adamw"])
def test_the_optimizer_traced_once_per_kind_of_weight_counts_as_the_whole_step(optimizer: str) -> None:
    import torch

    from engine.counting import _CountingMode, _optimizer_ops
    from engine.workloads import make_optimizer

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.LayerNorm(8),
                                    torch.nn.Linear(8, 4))
    model[0].bias.requires_grad_(False)  # a frozen weight has no step
    # PyTorch 1.x's step, one weight at a time, which is also how torch steps on the meta device
    workload = Workload(model="resnet18", mode="train", optimizer=optimizer, torch_major=1)  # type: ignore[arg-type]
    weights = [torch.nn.Parameter(torch.empty_like(p)) for p in model.parameters() if p.requires_grad]
    for weight in weights:
        weight.grad = torch.empty_like(weight)
    whole = make_optimizer(workload, weights)
    assert whole is not None
    whole.step()
    mode = _CountingMode()
    with mode:
        whole.step()
    assert _optimizer_ops(workload, model) == mode.ops


def test_a_model_built_on_the_meta_device_has_the_shapes_strides_and_dtypes_of_one_built_on_the_cpu() -> None:
    from engine.workloads import build_model

    # Building on the meta device skips the writes that initialise the weights: they must change nothing else.
    workload = Workload(model="mobilenetv3_small_050")
    meta, cpu = build_model(workload, "meta"), build_model(workload, "cpu")

    def layout(tensors: Iterator[tuple[str, Any]]) -> list[tuple[str, Any, Any, Any]]:
        return [(name, t.shape, t.stride(), t.dtype) for name, t in tensors]

    assert layout(meta.named_parameters()) == layout(cpu.named_parameters())
    assert layout(meta.named_buffers()) == layout(cpu.named_buffers())


def test_a_model_whose_constructor_needs_real_values_is_built_on_the_cpu_and_moved_to_the_meta_device(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    import engine.workloads
    from engine.workloads import build_model

    def create(workload: Workload) -> torch.nn.Module:
        # As timm 1.0.29's RegNet does: its stage widths are torch.unique of a tensor on the default device.
        widths = torch.unique(torch.tensor([8, 8, 16]))
        return torch.nn.Linear(int(widths[-1]), 4)

    monkeypatch.setattr(engine.workloads, "_create", create)
    model = build_model(Workload(model="resnet18"), "meta")
    assert model.weight.device.type == "meta" and model.weight.shape == (4, 16)


# registry, flops, hostaware ---------------------------------------------------------------------------------------


def test_every_estimator_is_registered_with_a_version() -> None:
    assert set(ESTIMATORS) == {"spec", "flops", "analytic", "hostaware", "calibrated"}
    for name in ESTIMATORS:
        estimator = get_estimator(name)
        assert estimator.name == name and estimator.version


def test_unknown_estimator_lists_the_known_ones() -> None:
    with pytest.raises(UnknownEstimator, match="unknown estimator 'roofline'; choose from spec, flops, analytic"):
        get_estimator("roofline")


def test_flops_on_the_hosts_own_gpu_predicts_the_measured_time() -> None:
    result = get_estimator("flops").estimate(Workload(model="resnet18"), catalog().get("h200-sxm-141-gb"),
                                             h200_host(), done_measurement(min_ms=10.0))
    assert result.latency_ms == pytest.approx(10.0)


def test_hostaware_is_the_weighted_geometric_mean_of_its_host_scaled_and_roofline_estimates() -> None:
    from engine.estimators.hostaware import CONSTANTS

    result = get_estimator("hostaware").estimate(Workload(model="resnet18"), catalog().get("rtx-3090"), h200_host(),
                                                 done_measurement(min_ms=10.0))
    parts, w = result.details, CONSTANTS.roofline_weight
    assert result.latency_ms == pytest.approx(parts["host_scaled_ms"] ** (1 - w) * parts["roofline_ms"] ** w)


def test_an_eagerly_timed_step_held_back_by_the_hosts_cpu_is_priced_from_its_kernels() -> None:
    # 40 ms a step for 10 ms of kernels: the host's CPU launching them took the rest, which is no target's time.
    eager = done_measurement(min_ms=40.0, median_ms=42.0, spread_ms=4.0, timing_mode="eager",
                             kernel_ms={"tensor": 6.0, "simt": 1.0, "other": 3.0})
    result = get_estimator("flops").estimate(Workload(model="resnet18"), catalog().get("h200-sxm-141-gb"),
                                             h200_host(), eager)
    assert (result.latency_ms, result.median_ms, result.spread_ms) == pytest.approx((10.0, 10.5, 1.0))


@pytest.mark.parametrize(("timing_mode", "kernel_ms", "share"), [
    ("graph", {"tensor": 2.0}, 1.0),  # a graph replay's time is the GPU's
    ("eager", {}, 1.0),  # not profiled: the timed step is all there is
    ("eager", {"tensor": 30.0, "other": 20.0}, 1.0),  # kernels over the step (profiler overhead): the step
    ("eager", {"tensor": 6.0, "simt": 1.0, "other": 3.0}, 0.25),
])
def test_the_host_gpus_share_of_a_timed_step(timing_mode: str, kernel_ms: dict[str, float], share: float) -> None:
    measurement = done_measurement(min_ms=40.0, timing_mode=timing_mode, kernel_ms=kernel_ms)
    assert (measurement.device_share, measurement.device_ms) == pytest.approx((share, 40.0 * share))


def test_hostaware_prices_an_eager_step_from_its_kernels_as_it_would_the_same_step_graph_timed() -> None:
    host, target, workload = h200_host(), catalog().get("rtx-3090"), Workload(model="resnet18")
    graph = get_estimator("hostaware").estimate(workload, target, host, done_measurement(min_ms=10.0))
    eager = get_estimator("hostaware").estimate(workload, target, host,
                                                done_measurement(min_ms=40.0, timing_mode="eager"))
    assert eager.latency_ms == pytest.approx(graph.latency_ms)


def test_hostaware_on_the_hosts_own_gpu_scales_the_host_time_by_one() -> None:
    from engine.estimators.hostaware import CONSTANTS, class_ratios

    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=8))
    host = catalog().get("h200-sxm-141-gb")
    assert class_ratios(counts, "amp-fp16", host, host, CONSTANTS) == {"tensor": 1.0, "simt": 1.0, "other": 1.0}


def test_hostaware_class_ratio_is_the_rooflines_target_over_host_time_of_that_class() -> None:
    from engine.estimators.analytic import EFFICIENCY
    from engine.estimators.hostaware import CONSTANTS, class_ratios
    from engine.estimators.roofline import roofline_ms

    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=8))
    host, target = catalog().get("h200-sxm-141-gb"), catalog().get("rtx-3090")
    on_target = roofline_ms(counts, target, "amp-fp16", EFFICIENCY, CONSTANTS.reuse)
    on_host = roofline_ms(counts, host, "amp-fp16", EFFICIENCY, CONSTANTS.reuse)
    ratios = class_ratios(counts, "amp-fp16", target, host, CONSTANTS)
    assert ratios["tensor"] == pytest.approx(on_target["tensor"] / on_host["tensor"])
    assert ratios["other"] == pytest.approx(on_target["other"] / on_host["other"])
    # resnet18 has no SIMT kernels: the class takes the whole step's ratio
    assert ratios["simt"] == pytest.approx(sum(on_target.values()) / sum(on_host.values()))


@pytest.mark.parametrize("name", ["flops", "hostaware"])
def test_ratio_estimators_predict_a_slower_gpu_slower(name: str) -> None:
    estimator = get_estimator(name)
    result = estimator.estimate(Workload(model="resnet18"), catalog().get("t4"), h200_host(),
                                done_measurement(min_ms=10.0))
    assert result.latency_ms is not None and result.latency_ms > 10.0


def test_hostaware_asks_for_one_profiled_unrestricted_run() -> None:
    estimator = get_estimator("hostaware")
    plans = {estimator.plan(Workload(model="resnet18"), gpu, h200_host()) for gpu in catalog()}
    assert len(plans) == 1
    (plan,) = plans
    assert plan.profile and plan.sm_mechanism == "none" and plan.clock_mode == "none"


def test_ratio_estimator_on_a_host_missing_from_the_catalog_says_so() -> None:
    host = h200_host(gpu_name="NVIDIA Voodoo 2")
    with pytest.raises(UnderstudyError, match="'NVIDIA Voodoo 2' is not in the catalog"):
        get_estimator("flops").estimate(Workload(model="resnet18"), catalog().get("t4"), host, done_measurement())


def _l2_card(l2_cache_mb: float) -> TargetSpec:
    return TargetSpec(id=f"l2-{l2_cache_mb:g}", name=f"card with {l2_cache_mb:g} MB of L2", sm_count=80,
                      boost_clock_mhz=1800,
                      memory_size_gb=24, memory_bandwidth_gbps=1000, l2_cache_mb=l2_cache_mb)


def test_l2_serves_the_whole_traffic_of_a_kernel_that_fits_in_its_usable_share() -> None:
    from engine.estimators.roofline import L2Reuse, dram_bytes

    # 72 MB of L2, half usable: 36 MB. A 10 MB kernel fits (no DRAM bytes); a 100 MB one has 36 % served from L2.
    moved = dram_bytes(np.array([10e6, 100e6]), _l2_card(72), L2Reuse(fraction=1.0, usable=0.5))
    assert moved.tolist() == pytest.approx([0.0, 64e6])


def test_without_l2_reuse_every_byte_goes_to_dram() -> None:
    from engine.estimators.roofline import dram_bytes

    assert dram_bytes(np.array([5e6]), _l2_card(72), None).tolist() == [5e6]


def test_the_rooflines_l2_reuse_serves_its_share_of_a_kernel_that_fits_in_half_the_l2() -> None:
    from engine.counts import WorkloadCounts
    from engine.estimators.roofline import Efficiency, roofline_ms

    # One memory-bound kernel moving 10 MB: in half of a 72 MB L2 it fits, so 0.4 of it comes from L2; in half of a
    # 6 MB L2 it does not, and 3 MB of it (0.4 x 3 / 10) does. 1000 GB/s at full efficiency: 10 us for 10 MB.
    counts = WorkloadCounts(kinds={}, ops=[("memory", 0.0, 10e6)], param_bytes=0.0, param_count=0, buffer_bytes=0.0,
                            input_bytes=0.0, peak_live_bytes=0.0)
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, l2_reuse=0.4)
    large, small = (roofline_ms(counts, _l2_card(mb), "amp-fp16", eff)["other"] for mb in (72, 6))
    assert large == pytest.approx(0.010 * 0.6)
    assert small == pytest.approx(0.010 * (1 - 0.4 * 3 / 10))


def test_a_kernel_inductor_generated_reaches_its_own_share_of_dram_peak_unless_the_bytes_in_flight_bind() -> None:
    from engine.counts import WorkloadCounts
    from engine.estimators.roofline import Efficiency, roofline_ms

    def other_ms(kind: str, eff: Efficiency) -> float:
        counts = WorkloadCounts(kinds={}, ops=[(kind, 0.0, 100e6)], param_bytes=0.0, param_count=0,
                                buffer_bytes=0.0, input_bytes=0.0, peak_live_bytes=0.0)
        return roofline_ms(counts, _l2_card(6), "amp-fp16", eff)["other"]

    # 100 MB at 1000 GB/s: 0.1 ms at all of the peak, 0.125 ms at 0.8 of it.
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, fused_memory=0.8)
    assert (other_ms("memory", eff), other_ms("fused", eff)) == (pytest.approx(0.1), pytest.approx(0.125))
    # 1 byte in flight per SM and cycle on 80 SMs caps both far below either share of the peak: the same time.
    capped = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, fused_memory=0.8, bytes_per_sm_cycle=1.0)
    assert other_ms("fused", capped) == pytest.approx(other_ms("memory", capped))
    assert other_ms("fused", capped) > 0.125


def test_hostaware_prices_memory_bound_work_lower_on_the_card_with_the_larger_l2() -> None:
    from engine.estimators.hostaware import CONSTANTS, class_ratios

    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=8))
    host = catalog().get("h200-sxm-141-gb")
    small, large = (class_ratios(counts, "amp-fp16", _l2_card(mb), host, CONSTANTS)["other"] for mb in (6, 72))
    assert large < small
