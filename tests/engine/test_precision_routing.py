"""Every precision and memory format priced by what the GPU runs: fp32 matmuls on the plain FP32 lanes at GEMM
efficiency (PyTorch keeps them off TF32), convolutions on tensor cores at the precision's rate (TF32 for fp32), and
NCHW tensor-core convolutions paying the layout conversions a channels-last workload does not (in a 16-bit training
step, more: its backward's NCHW kernels)."""

from __future__ import annotations

import pytest

from understudy.catalog import TargetSpec
from understudy.workload import Workload
# counts_for (count_workload, kept per workload): tests of one workload share one trace of it, across modules.
from engine.count_lookup import counts_for
from engine.counts import WorkloadCounts
from engine.estimators.roofline import Efficiency, by_class, convolution_share, roofline_kind_ms, roofline_ms

GPU = TargetSpec(id="g", name="g", sm_count=10, boost_clock_mhz=1000, memory_size_gb=8, memory_bandwidth_gbps=1000,
                 fp32_tflops=10, fp16_tensor_tflops=40, bf16_tensor_tflops=40, tf32_tensor_tflops=20)
EFF = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, matmul32=0.5, layout=0.5)


def priced(ops: list[tuple[str, float, float]], precision: str) -> dict[str, float]:
    return roofline_ms(WorkloadCounts(ops=ops), GPU, precision, EFF)


def test_an_fp32_matmul_runs_on_the_plain_lanes_at_gemm_efficiency() -> None:
    # 1 TFLOP at 10 TFLOPS x 0.5 = 200 ms, not the 2,000 ms a depthwise-convolution efficiency would give.
    assert priced([("matmul32", 1e12, 0.0)], "fp32")["simt"] == pytest.approx(200.0)


def test_the_convolution_share_counts_depthwise_and_grouped_convolutions_not_fp32_matmuls_on_the_same_lanes() -> None:
    # 10 GFLOP of fp32 GEMM at 10 TFLOPS x 0.5: 2 ms; 1 GB each of depthwise, grouped and 2 GB of memory-bound
    # traffic at 1,000 GB/s: 1, 1 and 2 ms. Of 6 ms, 2 are in plain-lane convolutions, 4 on the plain lanes.
    ops = [("matmul32", 1e10, 0.0), ("depthwise", 0.0, 1e9), ("grouped", 0.0, 1e9), ("memory", 0.0, 2e9)]
    kind_ms = roofline_kind_ms(WorkloadCounts(ops=ops), GPU, "fp32", EFF)
    assert kind_ms == {"matmul32": pytest.approx(2.0), "depthwise": pytest.approx(1.0),
                       "grouped": pytest.approx(1.0), "memory": pytest.approx(2.0)}
    assert convolution_share(kind_ms) == pytest.approx(1 / 3)
    assert by_class(kind_ms) == {"tensor": 0.0, "simt": pytest.approx(4.0), "other": pytest.approx(2.0)}


def test_a_step_of_no_time_has_no_convolution_share() -> None:
    assert convolution_share(roofline_kind_ms(WorkloadCounts(ops=[]), GPU, "fp32", EFF)) is None


def test_an_fp32_convolution_runs_on_tensor_cores_at_the_tf32_rate() -> None:
    assert priced([("tensor", 1e12, 0.0)], "fp32")["tensor"] == pytest.approx(50.0)  # 1 TFLOP at 20 TFLOPS
    assert priced([("tensor", 1e12, 0.0)], "amp-fp16")["tensor"] == pytest.approx(25.0)  # at 40 TFLOPS


def test_layout_conversions_are_memory_traffic_weighted_by_their_efficiency() -> None:
    # 1 GB counted, half of it really moved, at 1000 GB/s: 0.5 ms.
    assert priced([("layout", 0.0, 1e9)], "amp-fp16")["other"] == pytest.approx(0.5)


def test_a_16_bit_training_steps_layout_conversions_cost_the_training_layout_weight_on_top() -> None:
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, layout=0.5, training_layout=3.0)
    ops = WorkloadCounts(ops=[("layout", 0.0, 1e9)])
    # 1 GB counted at 1,000 GB/s: half of it moved at inference, 3 x that in an AMP training step.
    assert roofline_ms(ops, GPU, "amp-fp16", eff)["other"] == pytest.approx(0.5)
    assert roofline_ms(ops, GPU, "amp-fp16", eff, training=True)["other"] == pytest.approx(1.5)


def test_an_fp32_training_steps_layout_conversions_keep_the_forward_weight() -> None:
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, layout=0.5, training_layout=3.0)
    ops = WorkloadCounts(ops=[("layout", 0.0, 1e9), ("memory", 0.0, 1e9)])
    assert roofline_ms(ops, GPU, "fp32", eff, training=True)["other"] == pytest.approx(0.5 + 1.0)


def test_an_nchw_convolution_adds_a_read_and_a_write_of_its_input_and_output() -> None:
    counts = counts_for(Workload(model="resnet18", mode="infer", batch_size=1, precision="amp-fp16"))
    first_layout = next(moved for kind, _, moved in counts.ops if kind == "layout")
    # The stem convolution: a 3x224x224 input and a 64x112x112 output in fp16, each read and written once more.
    assert first_layout == 2 * (3 * 224 * 224 * 2 + 64 * 112 * 112 * 2)


def test_a_channels_last_workload_has_no_layout_conversions() -> None:
    nchw = counts_for(Workload(model="resnet18", mode="train", batch_size=1))
    nhwc = counts_for(Workload(model="resnet18", mode="train", batch_size=1, memory_format="nhwc"))
    assert nchw.kinds["layout"].ops == 20 + 20  # resnet18's convolutions forward and backward, not its classifier
    assert "layout" not in nhwc.kinds


def test_fp32_vit_matmuls_are_plain_fp32_work_and_its_patch_convolution_tf32() -> None:
    kinds = counts_for(Workload(model="test_vit", mode="infer", batch_size=2, precision="fp32")).kinds
    assert kinds["matmul32"].flops > 0
    assert kinds["tensor"].ops == 1  # the patch embedding


def test_the_tensor_rate_is_capped_by_what_an_sm_can_be_fed_per_cycle() -> None:
    # 1,000 FLOP per SM and cycle x 10 SMs x 1 GHz = 10 TFLOPS, under the 40 TFLOPS peak: 1 TFLOP takes 100 ms.
    fed = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, tensor_flop_per_sm_cycle=1000.0)
    priced = roofline_ms(WorkloadCounts(ops=[("tensor", 1e12, 0.0)]), GPU, "amp-fp16", fed)
    assert priced["tensor"] == pytest.approx(100)


def test_memory_bandwidth_is_capped_by_the_bytes_an_sm_keeps_in_flight() -> None:
    # 10 bytes per SM and cycle x 10 SMs x 1 GHz = 100 GB/s, under the 1000 GB/s peak: 1 GB takes 10 ms.
    issued = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, bytes_per_sm_cycle=10.0)
    priced = roofline_ms(WorkloadCounts(ops=[("memory", 0.0, 1e9)]), GPU, "amp-fp16", issued)
    assert priced["other"] == pytest.approx(10)


def test_a_kernel_gathering_from_a_permuted_tensor_is_strided_and_weighted_by_its_efficiency() -> None:
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, strided=3.0)
    # 1 GB at 1,000 GB/s is 1 ms dense, 3 ms gathered.
    assert roofline_ms(WorkloadCounts(ops=[("strided", 0.0, 1e9)]), GPU, "fp32", eff)["other"] == pytest.approx(3.0)


def test_a_transpose_made_contiguous_is_counted_as_strided() -> None:
    counts = counts_for(Workload(model="convnext_atto", mode="infer", batch_size=2, precision="fp32"))
    assert counts.kinds["strided"].ops > 0  # its LayerNorms run channels-last between permutes


def test_amp_matmuls_run_on_tensor_cores_and_their_layer_norms_in_fp32() -> None:
    fp16 = counts_for(Workload(model="vit_tiny_patch16_224", mode="infer", batch_size=2, precision="fp16"))
    amp = counts_for(Workload(model="vit_tiny_patch16_224", mode="infer", batch_size=2, precision="amp-fp16"))
    assert "matmul32" not in amp.kinds and amp.kinds["tensor"].flops == pytest.approx(fp16.kinds["tensor"].flops)
    # Autocast's casts (weights once, fp32 LayerNorm outputs back to fp16) are memory kernels pure fp16 lacks.
    assert amp.kinds["memory"].ops > fp16.kinds["memory"].ops
    assert amp.kinds["memory"].bytes > 1.3 * fp16.kinds["memory"].bytes


def test_a_serial_kernel_takes_its_iterations_times_the_latency_of_one() -> None:
    # 1,000,000 iterations of 300 ns each: 300 ms, though its 1 MB would take 1 us at 1,000 GB/s.
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, serial_ns=300.0)
    priced = roofline_ms(WorkloadCounts(ops=[("serial", 1e6, 1e6)]), GPU, "fp32", eff)
    assert priced["other"] == pytest.approx(300.0)


def test_a_bilinear_resize_loops_over_images_and_channels_on_nchw_and_not_on_channels_last() -> None:
    import torch
    import torch.nn.functional as F

    from engine.counting import _CountingMode

    tokens = torch.empty(8, 1 + 49, 16, device="meta")[:, 1:].transpose(1, 2).reshape(8, 16, 7, 7)  # as CoaT makes
    nchw, channels_last = (torch.empty(8, 16, 7, 7, device="meta").contiguous(memory_format=memory_format)
                           for memory_format in (torch.contiguous_format, torch.channels_last))
    for x, expected in ((nchw, [("serial", 8 * 16)]), (channels_last, [("memory", 0.0)]), (tokens, [("strided", 0.0)])):
        mode = _CountingMode()
        with mode:
            F.interpolate(x, scale_factor=2, mode="bilinear")
        assert [(kind, flops) for kind, flops, _ in mode.ops] == expected


def test_a_strided_kernel_is_capped_by_the_fewer_bytes_it_keeps_in_flight() -> None:
    # Dense: 10 bytes per SM and cycle x 10 SMs x 1 GHz = 100 GB/s; strided: 4 x 10 x 1 GHz = 40 GB/s. 1 GB each.
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, bytes_per_sm_cycle=10.0,
                     strided_bytes_per_sm_cycle=4.0)
    priced = roofline_ms(WorkloadCounts(ops=[("memory", 0.0, 1e9), ("strided", 0.0, 1e9)]), GPU, "amp-fp16", eff)
    assert priced["other"] == pytest.approx(10 + 25)


def test_the_strided_limit_does_not_bind_where_bandwidth_per_sm_is_low() -> None:
    # 200 bytes per SM and cycle x 10 SMs x 1 GHz = 2,000 GB/s, above the 1,000 GB/s peak: 1 GB takes 1 ms.
    eff = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, strided_bytes_per_sm_cycle=200.0)
    assert roofline_ms(WorkloadCounts(ops=[("strided", 0.0, 1e9)]), GPU, "fp32", eff)["other"] == pytest.approx(1.0)


def test_a_training_steps_depthwise_convolution_on_pytorchs_own_kernels_costs_the_training_multiplier() -> None:
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, depthwise_training=2.5)
    # 1 GB at 1,000 GB/s: 1 ms forward (its 1 GFLOP at 5 TFLOPS does not bind), 2.5 ms in training.
    ops = WorkloadCounts(ops=[("depthwise", 1e9, 1e9)])
    assert roofline_ms(ops, GPU, "fp32", eff, training=True)["simt"] == pytest.approx(2.5)
    assert roofline_ms(ops, GPU, "amp-bf16", eff, training=True)["simt"] == pytest.approx(2.5)
    assert roofline_ms(ops, GPU, "amp-bf16", eff)["simt"] == pytest.approx(1.0)


def test_an_fp16_training_steps_depthwise_convolution_on_pytorchs_own_kernels_pays_no_multiplier() -> None:
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, depthwise_training=2.5)
    ops = WorkloadCounts(ops=[("depthwise", 1e9, 1e9)])
    assert roofline_ms(ops, GPU, "amp-fp16", eff, training=True)["simt"] == pytest.approx(1.0)


def test_a_grouped_convolution_cudnn_runs_pays_no_multiplier() -> None:
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, depthwise_training=2.5)
    ops = WorkloadCounts(ops=[("grouped", 1e9, 1e9)])
    assert roofline_ms(ops, GPU, "amp-fp16", eff, training=True)["simt"] == pytest.approx(1.0)


def test_a_bf16_training_steps_batch_norm_runs_pytorchs_own_kernels_and_costs_the_multiplier() -> None:
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, bf16_norm_training=1.5)
    # 1 GB at 1,000 GB/s: 1 ms; 1.5 ms in a bf16 training step.
    ops = WorkloadCounts(ops=[("norm", 0.0, 1e9)])
    assert roofline_ms(ops, GPU, "amp-bf16", eff, training=True)["other"] == pytest.approx(1.5)


@pytest.mark.parametrize(("precision", "training"), [("amp-fp16", True), ("fp32", True), ("amp-bf16", False)])
def test_batch_norm_on_cudnn_or_in_inference_pays_no_multiplier(precision: str, training: bool) -> None:
    eff = Efficiency(tensor=1.0, simt=1.0, memory=1.0, launch_us=0.0, bf16_norm_training=1.5)
    ops = WorkloadCounts(ops=[("norm", 0.0, 1e9)])
    assert roofline_ms(ops, GPU, precision, eff, training=training)["other"] == pytest.approx(1.0)


def test_a_depthwise_convolution_issues_at_half_the_fp32_peak_where_int32_shares_the_lanes() -> None:
    # 1 TFLOP at 10 TFLOPS x simt 0.1: 1,000 ms on a chip of dedicated FP32 lanes, twice that on a consumer one.
    eff = Efficiency(tensor=1.0, simt=0.1, memory=1.0, launch_us=0.0)
    ops = WorkloadCounts(ops=[("depthwise", 1e12, 0.0)])
    hopper, consumer = (GPU.model_copy(update={"compute_capability": cc}) for cc in ("9.0", "8.6"))
    assert roofline_ms(ops, hopper, "amp-fp16", eff)["simt"] == pytest.approx(1000.0)
    assert roofline_ms(ops, consumer, "amp-fp16", eff)["simt"] == pytest.approx(2000.0)


def test_an_sm_is_fed_half_the_tf32_flop_it_is_fed_in_16_bit() -> None:
    # 1,000 FLOP per SM and cycle in fp16, 500 in TF32, x 10 SMs x 1 GHz: 5 TFLOPS, under the 20 TFLOPS TF32 peak.
    fed = Efficiency(tensor=1.0, simt=0.05, memory=1.0, launch_us=0.0, tensor_flop_per_sm_cycle=1000.0)
    assert roofline_ms(WorkloadCounts(ops=[("tensor", 1e12, 0.0)]), GPU, "fp32", fed)["tensor"] == \
        pytest.approx(200)
