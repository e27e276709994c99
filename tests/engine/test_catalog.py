"""The target catalog: every entry is complete, lookups are forgiving about spelling and strict about ambiguity,
and user-defined targets get stable ids and the rates they leave out."""

from __future__ import annotations

import pytest

from understudy.catalog import InlineTarget, TargetSpec, catalog, resolve_target
from understudy.errors import UnknownTarget


def test_catalog_has_the_gpus_the_project_promises() -> None:
    ids = set(catalog().ids())
    assert len(catalog()) >= 50
    assert {"rtx-3060-12-gb", "rtx-3090", "rtx-4090", "rtx-5090", "t4", "a100-sxm4-80-gb", "h200-sxm-141-gb"} <= ids


def test_every_catalog_entry_has_sources_and_all_rates() -> None:
    for target in catalog():
        assert target.origin == "catalog"
        assert target.source and target.tensor_source, target.id
        assert target.compute_capability, target.id
        for rate in ("fp32_tflops", "fp16_tensor_tflops", "bf16_tensor_tflops", "tf32_tensor_tflops"):
            assert getattr(target, rate) > 0, (target.id, rate)


def test_catalog_fp32_rate_matches_two_flops_per_core_per_clock() -> None:
    # RTX 3090: 10496 CUDA cores x 2 x 1695 MHz = 35.6 TFLOPS.
    assert catalog().get("rtx-3090").fp32_tflops == pytest.approx(10496 * 2 * 1695e6 / 1e12, rel=0.01)


@pytest.mark.parametrize("name", ["rtx3060", "RTX 3060", "GeForce RTX 3060 (12 GB)", "rtx-3060-12-gb",
                                  "geforce rtx 3060", "NVIDIA GeForce RTX 3060"])
def test_spellings_of_the_rtx_3060_resolve_to_one_id(name: str) -> None:
    assert catalog().get(name).id == "rtx-3060-12-gb"


@pytest.mark.parametrize(
    ("name", "target_id"),
    [("RTX 3060 Ti", "rtx-3060-ti-gddr6"), ("rtx 3080", "rtx-3080-10-gb"), ("RTX 3080 Ti", "rtx-3080-ti"),
     ("Tesla T4", "t4"), ("T4", "t4"), ("H200", "h200-sxm-141-gb"), ("rtx 5090", "rtx-5090"), ("4090", "rtx-4090"),
     ("A6000", "rtx-a6000"), ("quadro 8000", "quadro-rtx-8000"), ("6000 Ada", "rtx-6000-ada-generation"),
     ("RTX PRO 6000 Max-Q", "rtx-pro-6000-blackwell-max-q")],
)
def test_names_people_type_find_the_right_card(name: str, target_id: str) -> None:
    assert catalog().get(name).id == target_id


@pytest.mark.parametrize(
    ("name", "candidates"),
    [("rtx 4060 ti", {"rtx-4060-ti-8-gb", "rtx-4060-ti-16-gb"}), ("A100", {"a100-sxm4-40-gb", "a100-sxm4-80-gb",
                                                                            "a100-pcie-40-gb", "a100-pcie-80-gb"}),
     ("h100", {"h100-sxm5-80-gb", "h100-pcie-80-gb"}), ("a100 80", {"a100-sxm4-80-gb", "a100-pcie-80-gb"})],
)
def test_ambiguous_target_lists_every_candidate(name: str, candidates: set[str]) -> None:
    with pytest.raises(UnknownTarget, match="ambiguous") as info:
        catalog().get(name)
    assert {c.split(" ")[0] for c in info.value.candidates} == candidates
    for candidate in candidates:
        assert candidate in str(info.value)


def test_unknown_target_suggests_close_names() -> None:
    with pytest.raises(UnknownTarget, match="unknown target 'rtx 3099'; did you mean") as info:
        catalog().get("rtx 3099")
    assert any(c.startswith("rtx-3090 ") for c in info.value.candidates)


@pytest.mark.parametrize("name", ["blackwell", "Ada"])
def test_a_word_without_a_model_number_names_no_gpu_however_few_names_hold_it(name: str) -> None:
    with pytest.raises(UnknownTarget, match="unknown target"):
        catalog().get(name)


def test_unknown_target_without_close_names_points_to_the_list() -> None:
    with pytest.raises(UnknownTarget, match="understudy targets"):
        catalog().get("voodoo2")


@pytest.mark.parametrize("name", ["", "   ", "--"])
def test_empty_target_name_is_an_error(name: str) -> None:
    with pytest.raises(UnknownTarget, match="empty target name"):
        catalog().get(name)


@pytest.mark.parametrize(
    ("nvml_name", "memory_gb", "target_id"),
    [("NVIDIA H200", 141.0, "h200-sxm-141-gb"), ("NVIDIA GeForce RTX 4090", 24.0, "rtx-4090"),
     ("NVIDIA GeForce RTX 3060", 12.0, "rtx-3060-12-gb"), ("Tesla T4", 15.8, "t4"),
     ("NVIDIA A100-SXM4-80GB", 79.2, "a100-sxm4-80-gb"), ("NVIDIA A100-SXM4-40GB", 39.6, "a100-sxm4-40-gb"),
     ("NVIDIA GeForce RTX 4060 Ti", 16.0, "rtx-4060-ti-16-gb"),
     ("NVIDIA GeForce RTX 4060 Ti", 8.0, "rtx-4060-ti-8-gb"), ("NVIDIA H100 80GB HBM3", 79.6, "h100-sxm5-80-gb")],
)
def test_host_gpu_is_found_by_the_name_nvml_gives(nvml_name: str, memory_gb: float, target_id: str) -> None:
    found = catalog().find_by_device_name(nvml_name, memory_gb)
    assert found is not None and found.id == target_id


def test_host_gpu_missing_from_the_catalog_is_none() -> None:
    assert catalog().find_by_device_name("NVIDIA Voodoo 2", 0.012) is None


@pytest.mark.parametrize(
    ("precision", "rate"),
    [("amp-fp16", "fp16_tensor_tflops"), ("fp16", "fp16_tensor_tflops"), ("amp-bf16", "bf16_tensor_tflops"),
     ("bf16", "bf16_tensor_tflops"), ("fp32", "tf32_tensor_tflops")],
)
def test_tensor_rate_follows_the_precision(precision: str, rate: str) -> None:
    target = catalog().get("a100-sxm4-80-gb")
    assert target.tensor_tflops(precision) == getattr(target, rate)


def test_turing_has_no_bf16_tensor_speed_up() -> None:
    turing = catalog().get("rtx-2080-ti")
    assert turing.tensor_tflops("amp-bf16") < turing.tensor_tflops("amp-fp16")


def _laptop(**overrides: object) -> InlineTarget:
    fields: dict[str, object] = {"name": "My RTX 3060 laptop", "sm_count": 30, "boost_clock_mhz": 1425,
                                 "memory_bandwidth_gbps": 336, "memory_size_gb": 6}
    fields.update(overrides)
    return InlineTarget(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("target_id", "share"), [
    ("gtx-1080-ti", 0.5),  # the FP32 lanes do the integer work
    ("rtx-3090", 0.5), ("rtx-4090", 0.5), ("rtx-5090", 0.5),  # half the FP32 lanes are the INT32 lanes
    ("h200-sxm-141-gb", 1.0), ("a100-sxm4-80-gb", 1.0), ("v100-sxm2-16-gb", 1.0), ("quadro-rtx-8000", 1.0),
])
def test_integer_work_takes_half_the_fp32_peak_where_the_lanes_are_shared(target_id: str, share: float) -> None:
    assert catalog().get(target_id).fp32_share_beside_int32() == share


def test_a_chip_of_unknown_design_is_taken_for_a_consumer_one() -> None:
    spec = TargetSpec(id="x", name="x", sm_count=10, boost_clock_mhz=1000, memory_size_gb=8, memory_bandwidth_gbps=500)
    assert spec.fp32_share_beside_int32() == 0.5


def test_an_inline_target_that_gives_its_compute_capability_gets_the_integer_lanes_of_its_design() -> None:
    assert _laptop(compute_capability="9.0").to_spec().fp32_share_beside_int32() == 1.0
    assert _laptop(compute_capability="8.6").to_spec().fp32_share_beside_int32() == 0.5
    assert _laptop().to_spec().fp32_share_beside_int32() == 0.5


def test_inline_target_fills_rates_from_sms_and_clock() -> None:
    spec = _laptop().to_spec()
    assert spec.origin == "inline"
    assert spec.fp32_tflops == pytest.approx(30 * 1425e6 * 256 / 1e12, abs=1e-3)
    assert spec.fp16_tensor_tflops == pytest.approx(2 * spec.fp32_tflops, abs=1e-3)
    assert spec.tf32_tensor_tflops == pytest.approx(spec.fp32_tflops, abs=1e-3)


def test_inline_target_keeps_the_rates_it_gives() -> None:
    assert _laptop(fp16_tensor_tflops=40.0).to_spec().fp16_tensor_tflops == 40.0


def test_inline_target_id_is_stable_and_changes_with_the_spec() -> None:
    first, again = _laptop().to_spec(), _laptop().to_spec()
    assert first.id == again.id and first.id.startswith("inline-")
    assert _laptop(sm_count=32).to_spec().id != first.id
    assert _laptop(name="another name").to_spec().id != first.id


def test_inline_target_needs_the_four_basic_figures() -> None:
    with pytest.raises(ValueError, match="memory_bandwidth_gbps"):
        InlineTarget(name="x", sm_count=30, boost_clock_mhz=1425, memory_size_gb=6)  # type: ignore[call-arg]


def test_target_digest_ignores_sources_but_not_figures() -> None:
    spec = catalog().get("rtx-3090")
    assert spec.model_copy(update={"source": "elsewhere"}).digest() == spec.digest()
    assert spec.model_copy(update={"memory_bandwidth_gbps": 900.0}).digest() != spec.digest()


def test_resolve_target_takes_names_inline_targets_and_specs() -> None:
    spec = catalog().get("t4")
    assert resolve_target("Tesla T4") == spec
    assert resolve_target(spec) is spec
    assert isinstance(resolve_target(_laptop()), TargetSpec)
