"""Targets as they really run: a power-limited product holds a clock below its boost clock, derived from its TDP
against its chip's other products (understudy/power.py), or from a power limit a user sets on a catalog GPU, and every
rate the estimators use follows that clock."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from understudy.catalog import InlineTarget, TargetSpec, catalog
from understudy.errors import UnknownTarget

BUILD = Path(__file__).resolve().parents[2] / "scripts" / "build_catalog.py"


def build_catalog():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_catalog", BUILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def product(name: str, chip: str, tdp: float, sms: int, boost: float) -> dict[str, str]:
    return {"name": name, "gpu_chip": chip, "tdp_w": str(tdp), "sm_count": str(sms), "boost_clock_mhz": str(boost)}


def test_half_the_power_budget_of_its_chips_reference_holds_the_cube_root_of_a_half_of_its_boost() -> None:
    clocks = build_catalog().sustained_clocks([product("full", "X1", 300, 100, 2000), product("half", "X1", 150, 100,
                                                                                             2000)])
    assert clocks["full"] == 2000
    assert clocks["half"] == pytest.approx(2000 * 0.5 ** (1 / 3), abs=0.1)  # 1587.4 MHz


def test_a_product_alone_on_its_chip_holds_its_boost_clock() -> None:
    clocks = build_catalog().sustained_clocks([product("a", "X1", 300, 100, 2000), product("b", "Y1", 50, 100, 2000)])
    assert clocks["b"] == 2000


def test_the_rates_follow_the_sustained_clock() -> None:
    spec = TargetSpec(id="t", name="t", sm_count=100, boost_clock_mhz=2000, sustained_clock_mhz=1500,
                      memory_size_gb=16, memory_bandwidth_gbps=500, fp32_tflops=40, fp16_tensor_tflops=100,
                      bf16_tensor_tflops=100, tf32_tensor_tflops=50)
    assert spec.sustained_tensor_tflops("amp-fp16") == pytest.approx(75)
    assert spec.sustained_tensor_tflops("fp32") == pytest.approx(37.5)  # convolutions may use TF32
    assert spec.sustained_fp32_tflops() == pytest.approx(30)


def test_a_user_defined_target_runs_at_its_boost_clock_unless_it_says_otherwise() -> None:
    laptop = dict(name="laptop", sm_count=30, boost_clock_mhz=1700, memory_bandwidth_gbps=336, memory_size_gb=6)
    assert InlineTarget(**laptop).to_spec().sustained_clock() == 1700
    assert InlineTarget(**laptop, sustained_clock_mhz=1200).to_spec().sustained_clock() == 1200


@pytest.mark.parametrize("limited, sibling", [("a10-pcie", "rtx-3090"), ("rtx-6000-ada-generation", "rtx-4090"),
                                               ("h100-pcie-80-gb", "h100-sxm5-80-gb"), ("t4", "rtx-2080")])
def test_power_limited_parts_hold_a_lower_share_of_their_boost_than_their_chips_flagship(limited: str,
                                                                                       sibling: str) -> None:
    low, high = catalog().get(limited), catalog().get(sibling)
    assert low.sustained_clock() / low.boost_clock_mhz < 0.95 * high.sustained_clock() / high.boost_clock_mhz


def test_the_catalog_has_the_lambda_files_gpus() -> None:
    for name in ("NVIDIA Quadro RTX 8000", "NVIDIA Tesla V100 SXM2 16 GB", "NVIDIA A100 PCIe 40 GB",
                 "NVIDIA A100 PCIe 80 GB"):
        assert catalog().get(name).name == name


def test_a_power_limit_set_on_a_catalog_gpu_holds_the_cube_root_of_its_share_of_the_chips_best_budget() -> None:
    capped = catalog().get("rtx4090@300w")  # the RTX 4090 is AD102's best-supplied product: 450 W at 2520 MHz

    assert (capped.id, capped.name, capped.tdp_w) == ("rtx-4090@300w", "GeForce RTX 4090 at 300 W", 300)
    assert capped.sustained_clock() == pytest.approx(2520 * (300 / 450) ** (1 / 3), abs=0.1)  # 2201.4 MHz
    assert capped.sustained_tensor_tflops("amp-fp16") == pytest.approx(165.15 * 2201.4 / 2520, rel=1e-4)


def test_at_its_rated_tdp_a_power_limited_gpu_holds_the_catalogs_own_clock() -> None:
    assert catalog().get("a10-pcie@150w").sustained_clock() == catalog().get("a10-pcie").sustained_clock() == 1300.2


def test_a_power_limit_above_what_the_chip_needs_gives_the_boost_clock() -> None:
    assert catalog().get("rtx-3090@500w").sustained_clock() == 1695


def test_a_power_limit_is_read_in_any_spelling_of_the_target_and_the_unit() -> None:
    assert {catalog().get(query).id for query in ("RTX 4090 @ 300 W", "rtx-4090@300W", "rtx-4090@300w")} == {
        "rtx-4090@300w"}


def test_a_power_limit_outside_a_quarter_to_twice_the_rating_is_refused_with_the_range() -> None:
    with pytest.raises(UnknownTarget, match="between 112.5 and 900 W; got 50 W"):
        catalog().get("rtx4090@50w")


def test_a_power_limit_is_set_on_the_catalog_gpu_not_on_one_already_limited() -> None:
    with pytest.raises(UnknownTarget, match="already has a power limit"):
        catalog().get("rtx-4090@300w@200w")
