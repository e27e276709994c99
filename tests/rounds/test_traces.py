"""understudy.traces: seeded per-client traces whose clients are devices of their own, and what each format holds
for the tool that reads it (tests/rounds/test_frameworks.py runs the tools themselves on them)."""

from __future__ import annotations

import csv
import io
import json
import pickle

import numpy as np
import pytest

from understudy.bands import ErrorBand
from understudy.rounds import DeviceStep, RoundConfig, RoundModel
from understudy.traces import TRACE_FORMATS, render, sample_trace

BAND = ErrorBand(model="test", center=0.0, scale=0.2, z=tuple(np.linspace(-2, 2, 39)), basis="test")
FLEET = [DeviceStep("rtx-3090", 50.0, 120, "consumer", kernels=300, band=BAND),
         DeviceStep("t4", 120.0, 300, "datacenter", kernels=300, band=BAND),
         DeviceStep("inline-0123456789ab", 400.0, 80, "edge")]
CONFIG = RoundConfig(local_steps=20, sigma=0.3, availability=0.9, dropout=0.1)


@pytest.fixture(scope="module")
def rounds() -> RoundModel:
    return RoundModel(FLEET, batch_size=32, param_count=11_700_000, config=CONFIG)


@pytest.mark.parametrize("fmt", TRACE_FORMATS)
def test_a_seeded_trace_is_the_same_bytes_on_every_run(rounds, fmt):
    first = render(sample_trace(rounds, clients=50, rounds=5, seed=3), fmt).body
    assert render(sample_trace(rounds, clients=50, rounds=5, seed=3), fmt).body == first
    assert render(sample_trace(rounds, clients=50, rounds=5, seed=4), fmt).body != first


def test_clients_are_drawn_by_the_fleets_weights(rounds):
    trace = sample_trace(rounds, clients=20_000, rounds=1, seed=1)
    shares = np.bincount(trace.kinds, minlength=3) / trace.clients
    assert shares == pytest.approx([120 / 500, 300 / 500, 80 / 500], abs=0.01)


def test_each_client_is_a_device_of_its_own_so_400_clients_take_over_300_distinct_times():
    # examples/fl_client_selection.py's fleet: five catalog GPUs (a T4 among them) and two inline kinds, no round
    # to round variability (analytic predictions have none).
    fleet = [DeviceStep("rtx-4060", 4.0, 200, "consumer", kernels=300),
             DeviceStep("rtx-3060-12-gb", 4.2, 120, "consumer", kernels=300),
             DeviceStep("rtx-2060", 4.5, 150, "consumer", kernels=300),
             DeviceStep("gtx-1660-super", 7.0, 80, "consumer", kernels=300),
             DeviceStep("t4", 6.0, 60, "datacenter", kernels=300),
             DeviceStep("inline-laptop", 9.0, 150, "edge", kernels=300),
             DeviceStep("inline-jetson", 30.0, 100, "edge", kernels=300)]
    model = RoundModel(fleet, batch_size=32, param_count=11_700_000, config=RoundConfig(sigma=0))
    trace = sample_trace(model, clients=400, rounds=1, seed=2)
    assert len(np.unique(np.round(trace.times("nominal_s")[0], 9))) >= 300
    consumer = np.isin(trace.kinds, [0, 1, 2, 3])
    assert np.log(trace.link_factor[consumer]).std() == pytest.approx(model.kinds[0].link_sigma, rel=0.2)
    assert np.log(trace.compute_factor[consumer]).std() == pytest.approx(model.kinds[0].compute_sigma, rel=0.2)
    assert np.all(trace.compute_factor[trace.kinds == 4] == 1.0)  # data-center servers are alike


def test_a_trace_for_k_draws_its_participants_and_closes_each_round_at_the_kth_finisher(rounds):
    model = RoundModel(FLEET, batch_size=32, param_count=11_700_000,
                       config=CONFIG.model_copy(update={"overcommit": 1.5}))
    trace = sample_trace(model, clients=40, rounds=6, seed=5, k=8)
    assert np.all(trace.participants.sum(axis=1) == 12)
    times = trace.times("nominal_s")
    for r, closes in enumerate(trace.round_times()):
        finishers = np.sort(times[r][trace.finished()[r]])
        assert closes == finishers[min(8, len(finishers)) - 1]


def test_the_json_and_csv_carry_each_clients_device_and_step_band(rounds):
    trace = sample_trace(rounds, clients=6, rounds=2, seed=9)
    data = json.loads(render(trace, "json").body)
    rows = list(csv.DictReader(io.StringIO(render(trace, "csv").body.decode())))
    assert len(rows) == 12
    for row in rows:
        parts = float(row["download_s"]) + float(row["compute_s"]) + float(row["upload_s"])
        assert parts == pytest.approx(float(row["total_s"]))
    for device in data["devices"]:
        kind = rounds.kinds[trace.kinds[device["client_id"]]]
        if kind.band is None:
            assert device["step_low_ms"] is None and device["step_sigma"] is None
            continue
        low, high = kind.step_interval_ms(0.8)
        assert device["step_low_ms"] == pytest.approx(low * device["compute_factor"])
        assert device["step_high_ms"] == pytest.approx(high * device["compute_factor"])
        assert device["step_low_ms"] < device["step_ms"] < device["step_high_ms"]
        assert device["step_sigma"] == pytest.approx(kind.step_band_sigma())
    assert [row["step_high_ms"] for row in rows[:6]] == [str(d["step_high_ms"] or "") for d in data["devices"]]


def test_an_oort_trace_has_integer_clients_and_feedback_only_from_a_rounds_finishers(rounds):
    trace = sample_trace(rounds, clients=40, rounds=3, seed=6)
    data = json.loads(render(trace, "oort", oort_threshold=30, num_classes=10).body)
    durations = [client["duration"] for client in data["clients"]]
    assert [client["client_id"] for client in data["clients"]] == list(range(40))
    sorted_duration = sorted(durations)  # Oort's getTopK: the round_threshold-th percentile
    assert data["round_prefer_duration"] == sorted_duration[min(int(len(sorted_duration) * 30 / 100.),
                                                                len(sorted_duration) - 1)]
    for r, feedbacks in enumerate(data["rounds"]):
        assert [f["client_id"] for f in feedbacks] == np.flatnonzero(trace.finished()[r]).tolist()
        for feedback in feedbacks:
            assert feedback["reward"] == pytest.approx(20 * 32 * np.log(10))  # samples x untrained cross-entropy
            assert feedback["duration"] == pytest.approx(trace.times("nominal_s")[r, feedback["client_id"]])


def test_an_appfl_profile_has_only_appfls_fields_and_reproduces_each_round(rounds):
    trace = sample_trace(rounds, clients=25, rounds=4, seed=7)
    data = json.loads(render(trace, "appfl").body)

    def appfl_duration(profile: dict[str, float]) -> float:
        # appfl/vsim/client_profile.py: compute + download + upload at one bandwidth in decimal Mbps
        return (data["base_step_time"] * data["num_local_steps"] * profile["compute_factor"]
                + 2 * data["model_bytes"] * 8 / (profile["bandwidth"] * 1e6))

    assert {key for profile in data["profiles"].values() for key in profile} == {"compute_factor", "bandwidth"}
    for cid, profile in data["profiles"].items():
        assert appfl_duration(profile) == pytest.approx(trace.nominal("nominal_s")[int(cid)])
    for r, this_round in enumerate(data["rounds"]):
        assert sorted(map(int, this_round["profiles"])) == np.flatnonzero(trace.finished()[r]).tolist()
        for cid, profile in this_round["profiles"].items():
            assert appfl_duration(profile) == pytest.approx(trace.times("nominal_s")[r, int(cid)])


def test_an_flgo_trace_keeps_flgos_own_steps_and_closes_each_round_by_its_tolerance(rounds):
    trace = sample_trace(rounds, clients=10, rounds=2, seed=8)
    data = json.loads(render(trace, "flgo").body)
    for variables in data["variables"]:
        assert set(variables) == {"client_id", "prob_available", "prob_unavailable", "prob_drop", "capacity"}
        assert variables["prob_available"] + variables["prob_unavailable"] == pytest.approx(1.0)
    latency = data["rounds"][1]["latency"]
    assert latency[3] == round(trace.times("nominal_s")[1, 3] * 1000)
    assert data["rounds"][1]["tolerance_for_latency"] == round(trace.round_times()[1] * 1000)


def test_a_fedscale_pickle_keys_clients_0_to_n_and_holds_their_nominal_times(rounds):
    trace = sample_trace(rounds, clients=30, rounds=1, seed=5)
    profiles = pickle.loads(render(trace, "fedscale").body)
    assert sorted(profiles) == list(range(30))
    for c, profile in profiles.items():
        compute = 3 * 32 * 20 * profile["computation"] / 1000  # FedScale's ClientMetadata.get_completion_time
        comm = 2 * rounds.update_bytes / 1024 * 8 / profile["communication"]
        assert compute + comm == pytest.approx(trace.nominal("nominal_s")[c])


def test_a_fedscale_availability_pickle_puts_every_client_online_over_its_rounds(rounds):
    trace = sample_trace(rounds, clients=12, rounds=5, seed=10)
    avail = pickle.loads(render(trace, "fedscale_avail").body)
    starts = np.concatenate([[0.0], np.cumsum(trace.round_times(nominal=True))])
    online = trace.available & ~trace.dropped
    for c, entry in avail.items():
        assert set(entry) == {"duration", "inactive", "finish_time", "active", "model"}
        middles = (starts[:-1] + starts[1:]) / 2
        seen = [any(a <= t <= b for a, b in zip(entry["active"], entry["inactive"], strict=True)) for t in middles]
        assert seen == online[:, c].tolist()
