"""The mapping math: the SM share and core clock the host can actually give for a target."""

from __future__ import annotations

import pytest

from understudy.catalog import catalog
from engine.mapping import green_context_granularity, green_context_sms, mps_percentage, mps_sms, nearest_clock

H200_SMS = 132


@pytest.mark.parametrize(("cc", "granularity"), [("9.0", (8, 8)), ("10.0", (8, 8)), ("12.0", (8, 8)),
                                                 ("8.0", (4, 2)), ("8.6", (4, 2)), ("7.5", (2, 2)), (None, (8, 8))])
def test_green_context_granularity_follows_the_compute_capability(cc: str | None,
                                                                  granularity: tuple[int, int]) -> None:
    assert green_context_granularity(cc) == granularity


@pytest.mark.parametrize(("target", "given"), [(24, 24), (30, 32), (34, 32), (46, 48), (58, 56), (70, 72),
                                               (82, 80), (128, 128), (131, 128)])
def test_green_context_on_hopper_gives_the_nearest_multiple_of_8(target: int, given: int) -> None:
    assert green_context_sms(target, H200_SMS, "9.0") == given


@pytest.mark.parametrize(("target", "given"), [(28, 32), (36, 40), (20, 24), (60, 64), (108, 112)])
def test_green_context_half_way_rounds_up(target: int, given: int) -> None:
    assert green_context_sms(target, H200_SMS, "9.0") == given


def test_green_context_never_goes_below_the_minimum_partition() -> None:
    assert green_context_sms(1, H200_SMS, "9.0") == 8
    assert green_context_sms(3, 108, "8.0") == 4
    assert green_context_sms(1, 40, "7.5") == 2


def test_green_context_on_ampere_gives_even_counts() -> None:
    assert [green_context_sms(t, 108, "8.0") for t in (28, 29, 46, 107)] == [28, 30, 46, 108]


@pytest.mark.parametrize("target", [132, 142, 170, 188])
def test_target_with_as_many_or_more_sms_than_the_host_gets_all_host_sms(target: int) -> None:
    assert green_context_sms(target, H200_SMS, "9.0") == H200_SMS
    assert mps_percentage(target, H200_SMS) == (100, H200_SMS)


def test_green_context_is_never_more_than_the_host_has() -> None:
    for host in (20, 46, 126, 132):
        for target in range(1, host):
            assert green_context_sms(target, host, "9.0") <= host


def test_every_catalog_target_smaller_than_the_h200_maps_within_half_a_step() -> None:
    for target in catalog():
        given = green_context_sms(target.sm_count, H200_SMS, "9.0")
        if target.sm_count < H200_SMS:
            assert given % 8 == 0, target.id
            assert abs(given - target.sm_count) <= 4, target.id


@pytest.mark.parametrize(("percentage", "sms"), [(50, 66), (25, 32), (12, 14), (100, 132)])
def test_mps_share_matches_what_the_h200_gave(percentage: int, sms: int) -> None:
    assert mps_sms(percentage, H200_SMS) == sms


def test_mps_share_is_whole_tpcs_and_never_zero() -> None:
    for percentage in range(1, 101):
        sms = mps_sms(percentage, H200_SMS)
        assert sms % 2 == 0 and 2 <= sms <= H200_SMS


@pytest.mark.parametrize(("target", "expected"), [(66, (50, 66)), (32, (25, 32)), (14, (11, 14)), (28, (22, 28))])
def test_mps_percentage_is_the_smallest_giving_the_target_sms(target: int, expected: tuple[int, int]) -> None:
    assert mps_percentage(target, H200_SMS) == expected


def test_mps_percentage_gives_back_every_sm_count_mps_can_give() -> None:
    for percentage in range(1, 101):
        sms = mps_sms(percentage, H200_SMS)
        chosen, given = mps_percentage(sms, H200_SMS)
        assert given == sms
        assert mps_sms(chosen, H200_SMS) == sms


def test_mps_percentage_ties_go_to_fewer_sms() -> None:
    # 33 SMs lies between the 32 that 25% gives and the 34 that 26% gives.
    assert mps_percentage(33, H200_SMS) == (25, 32)


def test_mps_percentage_is_nearest_for_every_target() -> None:
    reachable = sorted({mps_sms(p, H200_SMS) for p in range(1, 101)})
    for target in range(1, H200_SMS):
        _, given = mps_percentage(target, H200_SMS)
        assert abs(given - target) == min(abs(r - target) for r in reachable)


H200_CLOCKS = [float(mhz) for mhz in range(345, 1981, 15)]


@pytest.mark.parametrize(("target", "clock"), [(1777, 1770), (1695, 1695), (1410, 1410), (1582, 1575),
                                               (1590, 1590), (2407, 1980), (2520, 1980), (100, 345)])
def test_nearest_supported_clock(target: float, clock: float) -> None:
    assert nearest_clock(target, H200_CLOCKS) == clock


def test_target_faster_than_the_host_gets_the_top_clock() -> None:
    assert nearest_clock(2617, H200_CLOCKS) == max(H200_CLOCKS)


def test_clock_half_way_between_two_supported_clocks_takes_the_higher() -> None:
    assert nearest_clock(1500, [1485.0, 1515.0]) == 1515.0


def test_nearest_clock_ignores_the_order_of_the_list() -> None:
    assert nearest_clock(1777, list(reversed(H200_CLOCKS))) == 1770


def test_host_without_supported_clocks_is_an_error() -> None:
    with pytest.raises(ValueError, match="no supported graphics clocks"):
        nearest_clock(1777, [])
