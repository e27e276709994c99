"""understudy.rounds: a client's round from its device's step time, kernel launches and link, and the round of K
clients, analytic and sampled. No server: pure arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from understudy.bands import ErrorBand
from understudy.catalog import InlineTarget, catalog, resolve_target
from understudy.links import DEFAULT_LINKS, LINK_SIGMA, Link, device_kind, link_for
from understudy.populations import DeviceLatency, expected_max, prob_round_within
from understudy.rounds import DeviceStep, RoundConfig, RoundError, RoundModel
from understudy.steps import COMPUTE_SIGMA, LAUNCH_US

# resnet18-sized: 11.7 M parameters, an fp32 update of 46.8 MB.
PARAMS = 11_700_000
FLEET = [DeviceStep("rtx-3090", 50.0, 120, "consumer", spread_ms=5.0),
         DeviceStep("t4", 120.0, 300, "datacenter", spread_ms=20.0),
         DeviceStep("inline-0123456789ab", 400.0, 80, "edge")]
# Every device of a kind alike: the round model of one device per kind.
ALIKE = {"device_compute_sigma": 0.0, "device_link_sigma": 0.0}


def model(config: RoundConfig, devices: list[DeviceStep] = FLEET, batch_size: int = 32) -> RoundModel:
    return RoundModel(devices, batch_size=batch_size, param_count=PARAMS, config=config)


def test_a_clients_round_is_download_plus_local_steps_plus_upload():
    kinds = model(RoundConfig(local_steps=10, links={"rtx-3090": Link(down_mbps=100, up_mbps=20)})).kinds
    rtx = kinds[0]
    assert rtx.download_s == pytest.approx(PARAMS * 4 * 8 / 100e6)  # 3.744 s
    assert rtx.compute_s == pytest.approx(0.5)  # 10 steps of 50 ms
    assert rtx.upload_s == pytest.approx(PARAMS * 4 * 8 / 20e6)  # 18.72 s
    assert rtx.nominal_s == pytest.approx(3.744 + 0.5 + 18.72)


def test_the_update_size_follows_the_dtype_or_is_given():
    assert model(RoundConfig(update_dtype="fp16")).update_bytes == PARAMS * 2
    assert model(RoundConfig(update_mb=10)).update_bytes == 10e6
    with pytest.raises(RoundError, match="update_mb"):
        RoundModel(FLEET, batch_size=32, param_count=None, config=RoundConfig())


def test_epochs_over_a_clients_samples_set_the_local_steps():
    assert RoundConfig(epochs=2, samples=500).steps(batch_size=32) == 32  # ceil(1000 / 32)
    assert RoundConfig().steps(batch_size=32) == 20
    with pytest.raises(ValidationError, match="not both"):
        RoundConfig(local_steps=5, epochs=1, samples=10)
    with pytest.raises(ValidationError, match="go together"):
        RoundConfig(epochs=1)


def test_a_devices_kind_comes_from_the_catalogs_data_on_it_not_its_id():
    kinds = {spec.id: device_kind(spec) for spec in catalog()}
    assert {kinds[i] for i in ("rtx-3090", "gtx-1660-super", "titan-rtx", "rtx-a6000", "quadro-rtx-8000")} == \
        {"consumer"}
    assert {kinds[i] for i in ("t4", "a10-pcie", "l4", "a100-sxm4-80-gb", "h200-sxm-141-gb")} == {"datacenter"}
    assert device_kind(resolve_target("rtx-4090@300w")) == "consumer"
    phone = InlineTarget(name="t4 phone", sm_count=8, boost_clock_mhz=1000, memory_bandwidth_gbps=50,
                         memory_size_gb=4)
    assert device_kind(resolve_target(phone)) == "edge"  # whatever its name or id says


def test_links_default_by_device_kind_and_can_be_given_per_target_or_per_kind():
    assert link_for("t4", "datacenter") == DEFAULT_LINKS["datacenter"]
    assert link_for("t4-like-board", "edge") == DEFAULT_LINKS["edge"]
    fast = Link(down_mbps=500, up_mbps=500)
    assert link_for("rtx-4090", "consumer", {"consumer": fast}) == fast
    assert link_for("rtx-4090", "consumer", {"rtx-4090": Link(down_mbps=1, up_mbps=1), "consumer": fast}).down_mbps == 1


def test_a_steps_wall_clock_time_is_the_slower_of_the_gpu_and_the_cpus_issuing():
    cpu_bound, gpu_bound = model(RoundConfig(local_steps=10), [
        DeviceStep("rtx-3090", 2.0, 1, "consumer", kernels=400),
        DeviceStep("t4", 50.0, 1, "datacenter", kernels=400)]).kinds
    issue_ms = 400 * LAUNCH_US / 1000
    assert cpu_bound.launch_ms == gpu_bound.launch_ms == pytest.approx(issue_ms)
    assert cpu_bound.step_ms == pytest.approx(issue_ms)  # the GPU's 2 ms run while the CPU issues
    assert gpu_bound.step_ms == pytest.approx(50.0)  # the CPU's issuing hides behind the kernels
    assert cpu_bound.compute_s == pytest.approx(10 * issue_ms / 1000)
    assert gpu_bound.compute_s == pytest.approx(10 * 50.0 / 1000)


def test_a_kinds_step_interval_applies_its_error_band_to_the_gpu_time():
    band = ErrorBand(model="test", center=0.0, scale=0.2, z=tuple(np.linspace(-2, 2, 39)), basis="test")
    low, high = band.interval(10.0, 0.8)
    gpu_bound = model(RoundConfig(), [DeviceStep("rtx-3090", 10.0, 1, "consumer", kernels=100, band=band)]).kinds[0]
    assert gpu_bound.launch_ms < low
    assert gpu_bound.step_interval_ms(0.8) == pytest.approx((low, high))
    assert gpu_bound.step_band_sigma() == pytest.approx(math.log(high / low) / 2.5632)
    # Where the CPU's issuing is slower than the band's low end, no faster GPU makes the step faster.
    mixed = model(RoundConfig(), [DeviceStep("rtx-3090", 10.0, 1, "consumer", kernels=180, band=band)]).kinds[0]
    assert low < mixed.launch_ms < high
    assert mixed.step_interval_ms(0.8) == pytest.approx((mixed.launch_ms, high))
    assert model(RoundConfig()).kinds[0].step_interval_ms() is None  # no band, no interval


def test_devices_of_a_kind_spread_by_its_defaults_unless_given():
    kinds = model(RoundConfig()).kinds
    assert [k.compute_sigma for k in kinds] == [COMPUTE_SIGMA[k.kind] for k in kinds]
    assert [k.link_sigma for k in kinds] == [LINK_SIGMA[k.kind] for k in kinds]
    given = model(RoundConfig(device_compute_sigma=0.1, device_link_sigma=0.2)).kinds
    assert {(k.compute_sigma, k.link_sigma) for k in given} == {(0.1, 0.2)}


def test_sigma_comes_from_the_measured_spread_unless_given():
    kinds = model(RoundConfig()).kinds
    assert kinds[0].sigma == pytest.approx(math.log(55 / 50) / 2.326)
    assert kinds[2].sigma == 0.0  # no spread measured
    assert all(kind.sigma == 0.25 for kind in model(RoundConfig(sigma=0.25)).kinds)


def test_without_variability_or_overcommitment_the_round_is_the_expected_max_of_k():
    rounds = model(RoundConfig(sigma=0, **ALIKE))
    as_latencies = [DeviceLatency(kind.target_id, kind.nominal_s, kind.share) for kind in rounds.kinds]
    for k in (1, 5, 20):
        assert rounds.expected_round_s(k) == pytest.approx(expected_max(as_latencies, k), rel=1e-9)
        deadline = rounds.kinds[1].nominal_s
        assert rounds.deadline(k, deadline).p_complete == pytest.approx(prob_round_within(as_latencies, k, deadline))


def test_overcommitment_keeps_the_first_k_and_drops_count_against_it():
    config = RoundConfig(overcommit=1.3, availability=0.9, dropout=0.1)
    assert config.sampled(10) == 13
    rounds = model(config)
    # 13 sampled, each finishing with probability 0.81: P(at least 10 finish)
    exact = sum(math.comb(13, j) * 0.81**j * 0.19 ** (13 - j) for j in range(10, 14))
    assert rounds.p_complete(10) == pytest.approx(exact)
    assert rounds.deadline(10, 1e9).expected_finishers == pytest.approx(13 * 0.81)


@pytest.mark.parametrize("config", [
    RoundConfig(sigma=0.3, **ALIKE),
    RoundConfig(sigma=0.3, overcommit=1.3, availability=0.9, dropout=0.05, **ALIKE),
    RoundConfig(local_steps=200, sigma=0.5, overcommit=1.5, availability=0.8, **ALIKE),
    RoundConfig(sigma=0),
    RoundConfig(sigma=0.2, overcommit=1.3, dropout=0.1),
    RoundConfig(local_steps=200, sigma=0, device_link_sigma=0),
], ids=["variability", "overcommitted-with-dropout", "compute-bound", "devices-differ", "devices-and-rounds-differ",
        "device-compute-differs"])
@pytest.mark.parametrize("k", [10, 50])
def test_10000_sampled_rounds_match_the_analytic_round_time_and_deadline_chances_within_2_percent(config, k):
    rounds = model(config)
    drawn = rounds.simulate(k, rounds=10_000, seed=20261201)  # seeded: the same draws on every run
    complete = np.isfinite(drawn.round_s)
    assert complete.mean() == pytest.approx(rounds.p_complete(k), abs=0.02)
    assert drawn.round_s[complete].mean() == pytest.approx(rounds.expected_round_s(k), rel=0.02)
    for quantile in (0.1, 0.5, 0.9):
        deadline = float(np.quantile(drawn.round_s[complete], quantile))
        outcome = rounds.deadline(k, deadline)
        assert (drawn.round_s <= deadline).mean() == pytest.approx(outcome.p_complete, abs=0.02)
        finishers = (drawn.client_s <= deadline).sum(axis=1).mean()
        assert finishers == pytest.approx(outcome.expected_finishers, rel=0.02)


def test_the_same_seed_draws_the_same_rounds():
    rounds = model(RoundConfig(sigma=0.3, overcommit=1.3, dropout=0.1))
    first, again = rounds.simulate(10, 100, seed=7), rounds.simulate(10, 100, seed=7)
    assert np.array_equal(first.client_s, again.client_s)
    assert not np.array_equal(first.client_s, rounds.simulate(10, 100, seed=8).client_s)
