"""understudy.populations against values worked out by hand (and, for the expected maximum, by enumeration)."""

from __future__ import annotations

import itertools
import math

import pytest

from understudy.populations import (DeviceLatency, ExcludedDevice, PopulationError, cdf, distribution,
                                    expected_max, max_clients_within, mean, percentile, prob_round_within, slowest,
                                    summarize)

# Four phones' worth of weight: one at 10 ms, two at 20 ms, one at 40 ms.
#   F(10) = 1/4, F(20) = 3/4, F(40) = 1
SMALL = [DeviceLatency("fast", 10.0, 1), DeviceLatency("mid", 20.0, 2), DeviceLatency("slow", 40.0, 1)]


def test_the_weighted_cdf_steps_at_each_distinct_latency():
    assert distribution(SMALL) == [(10.0, 0.25), (20.0, 0.75), (40.0, 1.0)]
    assert cdf(SMALL, 5) == 0.0
    assert cdf(SMALL, 10) == 0.25
    assert cdf(SMALL, 39.9) == 0.75
    assert cdf(SMALL, 1000) == 1.0


def test_percentiles_are_the_smallest_latency_whose_cdf_reaches_q():
    assert percentile(SMALL, 0.25) == 10.0  # exactly on a step: F(10) = 0.25
    assert percentile(SMALL, 0.26) == 20.0
    assert percentile(SMALL, 0.50) == 20.0
    assert percentile(SMALL, 0.75) == 20.0
    assert percentile(SMALL, 0.90) == 40.0
    assert percentile(SMALL, 0.99) == 40.0
    assert percentile(SMALL, 1.0) == 40.0


def test_the_expected_maximum_of_k_matches_the_hand_computation():
    # K = 1: the mean, 10/4 + 20/2 + 40/4 = 22.5
    assert expected_max(SMALL, 1) == pytest.approx(22.5)
    assert mean(SMALL) == pytest.approx(22.5)
    # K = 2: 10 (1/16) + 20 (9/16 - 1/16) + 40 (1 - 9/16) = 0.625 + 10 + 17.5 = 28.125
    assert expected_max(SMALL, 2) == pytest.approx(28.125)
    # K = 3: 10 (1/64) + 20 (27/64 - 1/64) + 40 (1 - 27/64) = (10 + 520 + 1480) / 64 = 31.40625
    assert expected_max(SMALL, 3) == pytest.approx(31.40625)
    # Large K: almost surely someone draws the slowest device.
    assert expected_max(SMALL, 200) == pytest.approx(40.0)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_expected_maximum_equals_enumerating_every_draw(k):
    total = sum(d.weight for d in SMALL)
    brute = 0.0
    for draw in itertools.product(SMALL, repeat=k):
        probability = math.prod(d.weight / total for d in draw)
        brute += probability * max(d.latency_ms for d in draw)
    assert expected_max(SMALL, k) == pytest.approx(brute)


def test_counts_and_shares_describe_the_same_population():
    as_shares = [DeviceLatency("fast", 10.0, 0.25), DeviceLatency("mid", 20.0, 0.5), DeviceLatency("slow", 40.0, 0.25)]
    for k in (1, 2, 5):
        assert expected_max(as_shares, k) == pytest.approx(expected_max(SMALL, k))
    assert percentile(as_shares, 0.9) == percentile(SMALL, 0.9)


def test_devices_with_the_same_latency_merge_into_one_step():
    twins = [DeviceLatency("a", 20.0, 1), DeviceLatency("b", 20.0, 1), DeviceLatency("c", 30.0, 2)]
    assert distribution(twins) == [(20.0, 0.5), (30.0, 1.0)]
    # K = 2: 20 (1/4) + 30 (1 - 1/4) = 27.5
    assert expected_max(twins, 2) == pytest.approx(27.5)


def test_the_chance_a_round_meets_a_deadline_and_the_most_clients_that_keep_it():
    assert prob_round_within(SMALL, 3, 20.0) == pytest.approx(0.75**3)  # 0.421875
    assert prob_round_within(SMALL, 3, 9.0) == 0.0
    assert prob_round_within(SMALL, 50, 40.0) == 1.0
    # 0.75^3 = 0.42 >= 0.4 > 0.75^4 = 0.32
    assert max_clients_within(SMALL, 20.0, confidence=0.4) == 3
    assert max_clients_within(SMALL, 20.0, confidence=0.9) == 0
    assert max_clients_within(SMALL, 40.0, confidence=0.99, cap=1000) == 1000
    assert max_clients_within(SMALL, 5.0, confidence=0.5) == 0


def test_the_summary_gathers_it_all_with_shares_of_the_whole_population():
    oom = ExcludedDevice(target_id="tiny", status="oom", share=4 / 8, reason="needs 30 GB")

    summary = summarize(SMALL, [1, 2, 3], slowest_n=2, excluded=[oom], excluded_weight=4)

    assert (summary.devices, summary.weight, summary.share) == (3, 4.0, 0.5)
    assert (summary.min_ms, summary.max_ms, summary.mean_ms) == (10.0, 40.0, 22.5)
    assert (summary.p50_ms, summary.p90_ms, summary.p99_ms) == (20.0, 40.0, 40.0)
    assert [(d.target_id, d.latency_ms, d.share) for d in summary.slowest] == [("slow", 40.0, 0.125),
                                                                               ("mid", 20.0, 0.25)]
    assert [(r.k, r.expected_max_ms) for r in summary.round_time] == [
        (1, pytest.approx(22.5)), (2, pytest.approx(28.125)), (3, pytest.approx(31.40625))]
    assert summary.excluded == [oom]


def test_the_slowest_devices_come_slowest_first_with_ties_by_name():
    tied = [DeviceLatency("b", 30.0, 1), DeviceLatency("a", 30.0, 1), DeviceLatency("c", 10.0, 1)]
    assert [d.target_id for d in slowest(tied, 5)] == ["a", "b", "c"]


@pytest.mark.parametrize("devices, message", [
    ([], "no device"),
    ([DeviceLatency("x", 10.0, 0)], "weight must be a positive"),
    ([DeviceLatency("x", 10.0, -1)], "weight must be a positive"),
    ([DeviceLatency("x", float("nan"), 1)], "latency must be a finite"),
])
def test_a_population_that_cannot_be_summarised_says_why(devices, message):
    with pytest.raises(PopulationError, match=message):
        expected_max(devices, 2)


def test_k_and_quantiles_out_of_range_are_refused():
    with pytest.raises(PopulationError, match="K"):
        expected_max(SMALL, 0)
    with pytest.raises(PopulationError, match="quantile"):
        percentile(SMALL, 0)
    with pytest.raises(PopulationError, match="quantile"):
        percentile(SMALL, 1.5)
