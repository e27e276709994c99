"""The `spec` estimator on a fake H200: the plan asks for what the host can give (SM share in its granularity,
nearest supported clock) and the estimate emulates the rest (clock ratio, SM ratio)."""

from __future__ import annotations

import pytest
from tests.fakes import done_measurement, h200_host, make_settings

from understudy.catalog import InlineTarget, TargetSpec, catalog
from understudy.results import Measurement
from understudy.workload import Workload
from engine.estimators.spec import SpecEstimator
from engine.mapping import mps_sms

WORKLOAD = Workload(model="resnet18")
HOST = h200_host()


def spec(**settings: object) -> SpecEstimator:
    return SpecEstimator(make_settings(**settings))


def target(name: str) -> TargetSpec:
    return catalog().get(name)


def with_sms(sm_count: int) -> TargetSpec:
    return InlineTarget(name=f"{sm_count}-SM card", sm_count=sm_count, boost_clock_mhz=1980,
                        memory_bandwidth_gbps=1000, memory_size_gb=24).to_spec()


def estimate(estimator: SpecEstimator, gpu: TargetSpec, measurement: Measurement | None = None) -> float:
    result = estimator.estimate(WORKLOAD, gpu, HOST, measurement or done_measurement())
    assert result.status == "done", result.error
    assert result.latency_ms is not None
    return result.latency_ms


# The plan ---------------------------------------------------------------------------------------------------------


def test_green_context_plan_is_in_multiples_of_8_for_every_smaller_target() -> None:
    estimator = spec()
    for gpu in catalog():
        if gpu.sm_count >= HOST.sm_count:
            continue
        plan = estimator.plan(WORKLOAD, gpu, HOST)
        assert plan.sm_mechanism == "green-context", gpu.id
        assert plan.sm_count is not None and plan.sm_count % 8 == 0, gpu.id
        assert abs(plan.sm_count - gpu.sm_count) <= 4, gpu.id


def test_plan_caps_memory_at_the_targets_size() -> None:
    assert spec().plan(WORKLOAD, target("rtx-3060"), HOST).memory_cap_gb == 12.0


@pytest.mark.parametrize(("sms", "percentage_sms"), [(66, 66), (32, 32), (14, 14)])
def test_mps_plan_gives_the_sm_counts_measured_on_the_h200(sms: int, percentage_sms: int) -> None:
    plan = spec(sm_mechanism="mps").plan(WORKLOAD, with_sms(sms), HOST)
    assert (plan.sm_mechanism, plan.sm_count) == ("mps", percentage_sms)


def test_mps_plan_uses_sm_counts_mps_can_give() -> None:
    reachable = {mps_sms(p, 132) for p in range(1, 101)}
    estimator = spec(sm_mechanism="mps")
    for gpu in catalog():
        if gpu.sm_count < HOST.sm_count:
            assert estimator.plan(WORKLOAD, gpu, HOST).sm_count in reachable, gpu.id


@pytest.mark.parametrize("mechanism", ["green-context", "mps"])
def test_target_bigger_than_the_host_runs_on_all_host_sms(mechanism: str) -> None:
    plan = spec(sm_mechanism=mechanism).plan(WORKLOAD, target("rtx-5090"), HOST)
    assert (plan.sm_mechanism, plan.sm_count) == ("none", None)


def test_target_with_the_hosts_sm_count_is_not_restricted() -> None:
    plan = spec().plan(WORKLOAD, target("h200-sxm-141-gb"), HOST)
    assert (plan.sm_mechanism, plan.sm_count) == ("none", None)


def test_without_clock_locking_the_clock_is_emulated_at_the_targets_boost() -> None:
    plan = spec().plan(WORKLOAD, target("rtx-3060"), HOST)
    assert (plan.clock_mode, plan.clock_mhz) == ("emulated", 1777.0)


def test_with_clock_locking_the_plan_locks_the_nearest_supported_clock() -> None:
    plan = spec(allow_clock_lock=True).plan(WORKLOAD, target("rtx-3060"), HOST)
    assert (plan.clock_mode, plan.clock_mhz) == ("locked", 1770.0)


def test_target_faster_than_the_host_locks_the_top_clock() -> None:
    plan = spec(allow_clock_lock=True).plan(WORKLOAD, target("rtx-5090"), HOST)
    assert (plan.clock_mode, plan.clock_mhz) == ("locked", 1980.0)


def test_host_listing_no_clocks_falls_back_to_emulation() -> None:
    host = h200_host(supported_clocks_mhz=[])
    plan = SpecEstimator(make_settings(allow_clock_lock=True)).plan(WORKLOAD, target("rtx-3060"), host)
    assert plan.clock_mode == "emulated"


def test_version_names_the_sm_mechanism_and_clock_handling() -> None:
    versions = {spec(sm_mechanism=m, allow_clock_lock=lock).version for m in ("green-context", "mps")
                for lock in (False, True)}
    assert len(versions) == 4


# The estimate -----------------------------------------------------------------------------------------------------


def test_target_bigger_than_the_host_is_scaled_by_host_sms_over_target_sms() -> None:
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1980.0)
    latency = estimate(spec(), target("rtx-5090"), measured)
    assert latency == pytest.approx(10.0 * (1980 / 2407) * (132 / 170))


def test_bigger_target_says_its_sms_were_emulated() -> None:
    result = spec().estimate(WORKLOAD, target("rtx-5090"), HOST, done_measurement())
    assert result.details["sm_emulated"] == "132 host SMs scaled to the target's 170"


def test_clock_emulation_scales_by_host_clock_over_target_clock() -> None:
    # RTX 3070 Ti: 48 SMs (a green context gives exactly that), 1770 MHz.
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1755.0)
    assert estimate(spec(), target("rtx-3070-ti"), measured) == pytest.approx(10.0 * 1755 / 1770)


def test_clock_emulation_uses_the_hosts_top_clock_when_none_was_observed() -> None:
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=None)
    assert estimate(spec(), target("rtx-3070-ti"), measured) == pytest.approx(10.0 * 1980 / 1770)


def test_sm_share_rounded_by_the_partition_size_is_scaled_back_to_the_targets_sms() -> None:
    # RTX 3060: 28 SMs, run on 32.
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1777.0)
    assert estimate(spec(), target("rtx-3060"), measured) == pytest.approx(10.0 * 32 / 28)


def test_same_gpu_as_the_host_predicts_the_measured_time() -> None:
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1980.0)
    assert estimate(spec(), target("h200-sxm-141-gb"), measured) == pytest.approx(10.0)


def test_median_and_spread_are_scaled_like_the_minimum() -> None:
    measured = done_measurement(min_ms=10.0, median_ms=12.0, spread_ms=2.0, observed_clock_mhz=1755.0)
    result = spec().estimate(WORKLOAD, target("rtx-3070-ti"), HOST, measured)
    factor = 1755 / 1770
    assert (result.median_ms, result.spread_ms) == (pytest.approx(12.0 * factor), pytest.approx(2.0 * factor))


def test_locked_clock_at_the_targets_boost_needs_no_clock_scaling() -> None:
    # RTX 3090: 1695 MHz is a supported H200 clock; 82 SMs run on 80.
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1695.0)
    assert estimate(spec(allow_clock_lock=True), target("rtx-3090"), measured) == pytest.approx(10.0 * 80 / 82)


def test_locked_clock_below_a_faster_targets_boost_is_scaled_by_the_shortfall() -> None:
    measured = done_measurement(min_ms=10.0, observed_clock_mhz=1980.0)
    latency = estimate(spec(allow_clock_lock=True), target("rtx-5090"), measured)
    assert latency == pytest.approx(10.0 * (1980 / 2407) * (132 / 170))


def test_a_workload_too_big_for_the_target_is_out_of_memory() -> None:
    # ResNet-50 AMP training at batch 1024 needs about 47 GB (engine.estimators.memory): even the low end of its band
    # is far over the 3060's 12 GB.
    big = Workload(model="resnet50", batch_size=1024)
    result = spec().estimate(big, target("rtx-3060"), HOST, done_measurement(peak_memory_gb=1.0))
    assert result.status == "oom"
    assert result.error is not None and "GeForce RTX 3060 (12 GB) has 12 GB" in result.error


def test_failed_measurement_fails_the_prediction_with_its_error() -> None:
    failed = Measurement(status="failed", error="MPS child exceeded its 1800 s limit")
    result = spec().estimate(WORKLOAD, target("rtx-3060"), HOST, failed)
    assert (result.status, result.error, result.latency_ms) == ("failed", failed.error, None)


def test_missing_measurement_fails_the_prediction() -> None:
    result = spec().estimate(WORKLOAD, target("rtx-3060"), HOST, None)
    assert (result.status, result.error) == ("failed", "no measurement was made")
