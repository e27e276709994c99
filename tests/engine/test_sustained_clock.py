"""Targets as they really run: a power-limited product holds a clock below its boost clock, derived from its TDP less
what its DRAM draws, against its chip's other products (understudy/power.py), or from a power limit a user sets on a
catalog GPU; while its tensor cores run at full rate, a part that does more tensor work per cycle than its chip's
reference holds a lower clock still; and every rate the estimators use follows those clocks."""

from __future__ import annotations

import pytest

from understudy.catalog import InlineTarget, TargetSpec, catalog
from understudy.errors import UnknownTarget
from tests.scripts import load_script


def build_catalog():  # type: ignore[no-untyped-def]
    return load_script("scripts/build_catalog.py")


def product(name: str, chip: str, tdp: float, sms: int, boost: float, memory: str = "", bandwidth: float = 500,
            geforce: bool = True) -> dict[str, str]:
    """A catalog row of an Ada chip: a GeForce part's tensor cores do half a workstation part's work per cycle."""
    return {"name": ("GeForce " if geforce else "NVIDIA ") + name, "gpu_chip": chip, "tdp_w": str(tdp),
            "sm_count": str(sms), "boost_clock_mhz": str(boost), "architecture": "Ada Lovelace",
            "compute_capability": "8.9", "fp32_tflops_boost": str(sms * boost * 256 / 1e6), "memory_type": memory,
            "memory_bandwidth_gbps": str(bandwidth)}


def test_half_the_power_budget_of_its_chips_reference_holds_the_cube_root_of_a_half_of_its_boost() -> None:
    clocks = build_catalog().power_clocks([product("full", "X1", 300, 100, 2000),
                                           product("half", "X1", 150, 100, 2000)])
    assert clocks["GeForce full"].sustained_mhz == 2000
    assert clocks["GeForce half"].sustained_mhz == pytest.approx(2000 * 0.5 ** (1 / 3), abs=0.1)  # 1587.4 MHz


def test_a_product_alone_on_its_chip_holds_its_boost_clock() -> None:
    clocks = build_catalog().power_clocks([product("a", "X1", 300, 100, 2000), product("b", "Y1", 50, 100, 2000)])
    assert clocks["GeForce b"].sustained_mhz == 2000


def test_the_dram_takes_its_energy_per_bit_out_of_the_budget() -> None:
    # 1000 GB/s of GDDR6 at 7.5 pJ/bit draws 60 W: the reference keeps 400 - 0 W, the other 200 - 60 W.
    clocks = build_catalog().power_clocks([product("ref", "X1", 400, 100, 2000, memory="HBM-unknown"),
                                           product("gddr", "X1", 200, 100, 2000, memory="GDDR6", bandwidth=1000)])
    assert clocks["GeForce gddr"].sustained_mhz == pytest.approx(2000 * (140 / 400) ** (1 / 3), abs=0.1)  # 1409.4


def test_a_part_doing_twice_its_references_tensor_work_per_cycle_holds_a_lower_clock_under_it() -> None:
    # Half the reference's budget, and twice its tensor FLOP per SM and cycle: a quarter of the budget per unit of
    # tensor work.
    clocks = build_catalog().power_clocks([product("ref", "X1", 400, 100, 2000),
                                           product("pro", "X1", 200, 100, 2000, geforce=False)])
    assert clocks["NVIDIA pro"].sustained_mhz == pytest.approx(2000 * 0.5 ** (1 / 3), abs=0.1)  # 1587.4
    assert clocks["NVIDIA pro"].tensor_mhz == {precision: pytest.approx(2000 * 0.25 ** (1 / 3), abs=0.1)  # 1259.9
                                               for precision in ("fp16", "bf16", "tf32")}


def test_a_part_whose_limit_does_not_bind_holds_its_boost_clock_under_tensor_work_too() -> None:
    clocks = build_catalog().power_clocks([product("ref", "X1", 300, 100, 2000),
                                           product("pro", "X1", 900, 100, 2000, geforce=False)])
    assert clocks["NVIDIA pro"].tensor_mhz["fp16"] == 2000


def test_the_tensor_rates_follow_the_clock_held_under_tensor_work() -> None:
    spec = TargetSpec(id="t", name="t", sm_count=100, boost_clock_mhz=2000, sustained_clock_mhz=1600,
                      fp16_tensor_clock_mhz=1000, tf32_tensor_clock_mhz=1200, memory_size_gb=16,
                      memory_bandwidth_gbps=500, fp32_tflops=40, fp16_tensor_tflops=100, bf16_tensor_tflops=100,
                      tf32_tensor_tflops=50)
    assert spec.sustained_tensor_tflops("amp-fp16") == pytest.approx(50)
    assert spec.sustained_tensor_tflops("fp32") == pytest.approx(30)
    assert spec.sustained_tensor_tflops("amp-bf16") == pytest.approx(80)  # no clock of its own: the sustained one
    assert spec.sustained_fp32_tflops() == pytest.approx(32)


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


def laptop(**power: object) -> InlineTarget:
    """An RTX 4090 Laptop GPU as its public specs give it: an AD103 of 76 SMs, boost 2040 MHz, at a TGP of choice."""
    return InlineTarget(name="RTX 4090 Laptop", sm_count=76, boost_clock_mhz=2040, memory_bandwidth_gbps=576,
                        memory_size_gb=16, **power)  # type: ignore[arg-type]


# What GDDR6X at the RTX 4080's 716.8 GB/s draws (7.25 pJ/bit): AD103's best-supplied catalog product, 320 W on 76
# SMs at 2505 MHz; and GDDR6 at the laptop part's 576 GB/s (7.5 pJ/bit).
RTX_4080_DRAM_W = 7.25e-12 * 8 * 716.8e9
LAPTOP_DRAM_W = 7.5e-12 * 8 * 576e9


def test_a_user_defined_part_given_its_power_limit_and_chip_holds_the_cube_root_of_its_share_of_the_chips_best_budget(
) -> None:
    reference = (320 - RTX_4080_DRAM_W) / (76 * 2.505 ** 3)
    expected = 2040 * (((150 - LAPTOP_DRAM_W) / (76 * 2.040 ** 3)) / reference) ** (1 / 3)  # 1867.9 MHz
    spec = laptop(gpu_chip="AD103", tdp_w=150, memory_type="GDDR6").to_spec()

    assert spec.sustained_clock() == pytest.approx(expected, abs=0.05)
    assert (spec.gpu_chip, spec.tdp_w) == ("AD103", 150)


def test_a_user_defined_part_at_more_power_than_its_clock_needs_holds_its_boost() -> None:
    assert laptop(gpu_chip="AD103", tdp_w=400).to_spec().sustained_clock() == 2040


def test_each_power_limit_of_a_user_defined_part_is_a_target_of_its_own() -> None:
    assert laptop(gpu_chip="AD103", tdp_w=150).to_spec().id != laptop(gpu_chip="AD103", tdp_w=80).to_spec().id


def test_the_chip_of_a_user_defined_part_is_read_in_any_case() -> None:
    assert laptop(gpu_chip=" ad103 ", tdp_w=150).to_spec() == laptop(gpu_chip="AD103", tdp_w=150).to_spec()


def test_a_power_limit_without_the_chip_is_refused_saying_what_to_add() -> None:
    with pytest.raises(ValueError, match="tdp_w needs gpu_chip"):
        laptop(tdp_w=150)


def test_a_power_limit_and_a_sustained_clock_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        laptop(gpu_chip="AD103", tdp_w=150, sustained_clock_mhz=1800)


def test_a_chip_no_catalog_gpu_is_built_on_is_refused_with_the_chips_it_knows() -> None:
    with pytest.raises(ValueError, match="'GA107'.*AD102, AD103"):
        laptop(gpu_chip="GA107", tdp_w=60)


def test_a_power_limit_under_a_quarter_of_the_chips_best_budget_is_refused_with_the_least() -> None:
    # A part that names no DRAM is taken to have its chip's reference's: GDDR6X, at its own 576 GB/s.
    dram = 7.25e-12 * 8 * 576e9
    least = 0.25 * (320 - RTX_4080_DRAM_W) / (76 * 2.505 ** 3) * 76 * 2.040 ** 3 + dram  # 71.0 W
    assert laptop(gpu_chip="AD103", tdp_w=72).to_spec().sustained_clock() > 0
    with pytest.raises(ValueError, match=f"below the {least:.0f} W"):
        laptop(gpu_chip="AD103", tdp_w=70)


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
    dram = 7.25e-12 * 8 * 1008e9  # its GDDR6X at 1008 GB/s: 58.5 W

    assert (capped.id, capped.name, capped.tdp_w) == ("rtx-4090@300w", "GeForce RTX 4090 at 300 W", 300)
    clock = 2520 * ((300 - dram) / (450 - dram)) ** (1 / 3)  # 2145.2 MHz
    assert capped.sustained_clock() == pytest.approx(clock, abs=0.1)
    assert capped.sustained_tensor_tflops("amp-fp16") == pytest.approx(165.15 * clock / 2520, rel=1e-4)


def test_at_its_rated_tdp_a_power_limited_gpu_holds_the_catalogs_own_clocks() -> None:
    at_rating, listed = catalog().get("a10-pcie@150w"), catalog().get("a10-pcie")
    assert at_rating.sustained_clock() == listed.sustained_clock() == 1249.6
    assert at_rating.tensor_clock("fp32") == listed.tensor_clock("fp32") == 991.8


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
