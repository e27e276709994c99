"""The clocks a GPU holds under its power limit: under a sustained deep-learning load, and while its tensor cores
run at full rate.

A GPU holds its boost clock under a deep-learning load only while its power limit allows. Two things share the
board's budget:

- its DRAM, which under a deep-learning step is busy most of the time (the memory-bound kernels are most of a step)
  and draws energy per bit moved by its technology: 7.5 pJ/bit for GDDR6, 7.25 for GDDR6X and 6.0 for HBM2E
  (Micron's "Ultra-Bandwidth Solutions" comparison of average device power), GDDR7 at two thirds of GDDR6's
  (Micron's GDDR7 announcement, June 2024: "greater than 50 % power-efficiency improvement compared to GDDR6"),
  HBM3 at 1/2.5 of HBM2E's (Micron's HBM3 Gen2 announcement, July 2023: "2.5x improvement in performance per watt"
  over its HBM2E) and HBM3E at 0.7 of that (Micron's HBM3E, which the H200 carries, "30 % lower power consumption
  than the competition", May 2024); HBM2 is taken as HBM2E and GDDR5X as GDDR6. At its full bandwidth that is 36 W
  of an A10's 150 W, 98 W of an H100 PCIe's 350 W, but 54 W of an RTX 3090's 350 W;
- its SMs, whose dynamic power goes about as SMs x f^3 (the voltage rises with the clock) times the work they do
  per cycle.

So a product's power budget per SM and cycle, r = (TDP - DRAM watts) / (SMs x boost^3), says how far its clock must
fall below boost to stay inside its limit. The reference is the product of the same chip with the most budget: it is
taken to hold its boost clock under any load, and a product (or a power limit set on one) of budget r holds
boost x min(1, r / r_reference)^(1/3) under a sustained load.

Tensor work per cycle is not the same on every product of a chip: most of NVIDIA's workstation and data-center parts
of a GeForce chip (an A10, an RTX A6000, a T4, an L4, an RTX PRO 6000 Max-Q) run fp16 with fp32 accumulation and TF32
at twice the GeForce rate per SM and cycle (not all: the L40 and the RTX 6000 Ada run them at the GeForce rate, as
the catalog's tensor rates say, scripts/build_catalog.py). Twice the work per cycle draws about twice the power, so
where the power limit binds, such a part holds a lower clock while its tensor cores run at full rate:
boost x min(1, r / (w x r_reference))^(1/3), w its tensor FLOP per SM and cycle over the reference's in that
precision. Where the limit does not bind (a part at its chip's best budget) nothing changes, and w is 1 between
products of one design (an A100 PCIe and an A100 SXM).

One rule for every use: the catalog's clocks (scripts/build_catalog.py, each product at its rated TDP), a power limit
a user sets on a catalog GPU (`rtx-4090@300w`), and a user-defined part given its power limit and chip (a laptop
part's TGP: understudy.catalog). Nothing in it is fitted to latencies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Picojoules per bit a DRAM technology moves (see the module docstring), by the catalog's memory_type.
DRAM_PJ_PER_BIT: dict[str, float] = {
    "GDDR5X": 7.5, "GDDR6": 7.5, "GDDR6X": 7.25, "GDDR7": 5.0, "HBM2": 6.0, "HBM2e": 6.0, "HBM3": 2.4, "HBM3e": 1.68,
}
# The precisions whose tensor rates can differ between products of one chip: the clock held under each.
TENSOR_PRECISIONS = ("fp16", "bf16", "tf32")


def dram_watts(memory_type: str, bandwidth_gbps: float) -> float:
    """What the DRAM draws moving `bandwidth_gbps`; 0 for a technology the table lacks."""
    return DRAM_PJ_PER_BIT.get(memory_type, 0.0) * 1e-12 * 8 * bandwidth_gbps * 1e9


def power_budget(tdp_w: float, sm_count: int, boost_clock_mhz: float, dram_w: float = 0.0) -> float:
    """Watts per SM per GHz^3 at the boost clock, of what the DRAM leaves of the TDP."""
    return max(tdp_w - dram_w, 0.0) / _cube_load(sm_count, boost_clock_mhz)


def product_budget(tdp_w: float, sm_count: int, boost_clock_mhz: float, memory_type: str,
                   bandwidth_gbps: float) -> float:
    """A product's power budget, its DRAM at full bandwidth taken out of its TDP."""
    return power_budget(tdp_w, sm_count, boost_clock_mhz, dram_watts(memory_type, bandwidth_gbps))


def tensor_per_sm_cycle(tflops: Mapping[str, float], sm_count: int, boost_clock_mhz: float) -> dict[str, float]:
    """Dense tensor FLOP per SM and cycle by precision, from peak TFLOPS at the boost clock."""
    return {precision: rate * 1e6 / (sm_count * boost_clock_mhz) for precision, rate in tflops.items()}


def power_at_budget(budget: float, sm_count: int, boost_clock_mhz: float, dram_w: float = 0.0) -> float:
    """The watts that give a part of `sm_count` SMs at `boost_clock_mhz` the power budget `budget`."""
    return budget * _cube_load(sm_count, boost_clock_mhz) + dram_w


def _cube_load(sm_count: int, boost_clock_mhz: float) -> float:
    # Dynamic power's scale: SMs x f^3, f in GHz.
    return sm_count * (boost_clock_mhz / 1e3) ** 3


def power_limited_clock(boost_clock_mhz: float, budget: float, reference_budget: float, work: float = 1.0) -> float:
    """MHz held at `budget` on a chip whose best-supplied product has `reference_budget` (and holds its boost),
    doing `work` times the reference's work per SM and cycle."""
    return boost_clock_mhz * min(1.0, budget / (work * reference_budget)) ** (1 / 3)


@dataclass(frozen=True)
class ChipReference:
    """A chip's best-supplied product: its power budget, its tensor FLOP per SM and cycle by precision, and its DRAM
    technology (what a part of the chip that names none is taken to have)."""

    budget: float
    tensor_per_sm_cycle: Mapping[str, float]
    memory_type: str


@dataclass(frozen=True)
class HeldClocks:
    sustained_mhz: float
    tensor_mhz: dict[str, float]  # by TENSOR_PRECISIONS


def held_clocks(boost_clock_mhz: float, budget: float, reference: ChipReference,
                tensor_per_sm_cycle: Mapping[str, float]) -> HeldClocks:
    """The clocks a product of budget `budget` holds: under a sustained load, and while its tensor cores run at
    full rate in each precision (tensor_per_sm_cycle: its dense FLOP per SM and cycle)."""
    tensor = {}
    for precision in TENSOR_PRECISIONS:
        own, theirs = tensor_per_sm_cycle.get(precision, 0.0), reference.tensor_per_sm_cycle.get(precision, 0.0)
        # Rounded: products of one design differ in their rates only by the rounding of the published figures.
        work = round(own / theirs, 3) if own > 0 and theirs > 0 else 1.0
        tensor[precision] = round(power_limited_clock(boost_clock_mhz, budget, reference.budget, work), 1)
    return HeldClocks(round(power_limited_clock(boost_clock_mhz, budget, reference.budget), 1), tensor)


def chip_references(products: Iterable[tuple[str, float, Mapping[str, float], str]]) -> dict[str, ChipReference]:
    """Each chip's best-supplied product, from (chip, budget, tensor FLOP per SM and cycle, memory type) per
    product."""
    best: dict[str, ChipReference] = {}
    for chip, budget, tensor, memory_type in products:
        if chip not in best or budget > best[chip].budget:
            best[chip] = ChipReference(budget, dict(tensor), memory_type)
    return best
