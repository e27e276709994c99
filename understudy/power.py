"""The clock a GPU holds under its power limit.

A GPU holds its boost clock under a deep-learning load only while its power limit allows. Dynamic power goes about as
SMs x f^3 (the voltage rises with the clock), so a product's power budget per SM and cycle, r = TDP / (SMs x boost^3),
says how far its clock must fall below boost to stay inside its limit. The reference is the product of the same chip
with the most budget: it is taken to hold its boost clock, and a product (or a power limit set on one) of budget r
holds boost x min(1, r / r_reference)^(1/3).

One rule for every use: the catalog's sustained clocks (scripts/build_catalog.py, each product at its rated TDP), a
power limit a user sets on a catalog GPU (`rtx-4090@300w`), and a user-defined part given its power limit and chip (a
laptop part's TGP: understudy.catalog).
"""

from __future__ import annotations

from collections.abc import Iterable


def power_budget(tdp_w: float, sm_count: int, boost_clock_mhz: float) -> float:
    """Watts per SM per GHz^3 at the boost clock."""
    return tdp_w / _cube_load(sm_count, boost_clock_mhz)


def power_at_budget(budget: float, sm_count: int, boost_clock_mhz: float) -> float:
    """The watts that give a part of `sm_count` SMs at `boost_clock_mhz` the power budget `budget`."""
    return budget * _cube_load(sm_count, boost_clock_mhz)


def _cube_load(sm_count: int, boost_clock_mhz: float) -> float:
    # Dynamic power's scale: SMs x f^3, f in GHz.
    return sm_count * (boost_clock_mhz / 1e3) ** 3


def power_limited_clock(boost_clock_mhz: float, budget: float, reference_budget: float) -> float:
    """MHz held at `budget` on a chip whose best-supplied product has `reference_budget` (and holds its boost)."""
    return boost_clock_mhz * min(1.0, budget / reference_budget) ** (1 / 3)


def reference_budgets(budgets: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Each chip's most budget over its products, from (chip, budget) pairs."""
    best: dict[str, float] = {}
    for chip, budget in budgets:
        best[chip] = max(best.get(chip, 0.0), budget)
    return best
