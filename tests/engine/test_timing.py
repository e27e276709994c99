"""Kernel classes judged from kernel names, as the host profile splits a step's device time."""

from __future__ import annotations

import pytest

from engine.timing import kernel_class


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", "tensor"),
        ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "tensor"),
        ("sm90_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x32", "tensor"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute", "tensor"),
        ("sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32", "tensor"),
        ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "tensor"),
        ("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_segment_k_off", "simt"),
        ("ampere_sgemm_128x64_nn", "simt"),
        ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<3, c10::Half>", "simt"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "other"),
        ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<__half, float, true, 1>", "other"),
        ("void nchwToNhwcKernel<__half, __half, float, true, false>", "other"),
    ],
)
def test_kernels_are_classed_by_what_limits_them(name: str, expected: str) -> None:
    assert kernel_class(name) == expected


@pytest.mark.parametrize(
    "name",
    ["triton_poi_fused__native_batch_norm_legit_no_training_convolution_relu_3",
     "triton_red_fused__scaled_dot_product_efficient_attention_mean_7", "triton_per_fused_add_native_layer_norm_2"],
)
def test_inductors_own_kernels_are_memory_bound_whatever_ops_they_fused(name: str) -> None:
    assert kernel_class(name) == "other"
