"""understudy.traces: seeded per-client traces, each format read the way its tool reads it (FedScale by FedScale's
own client manager; Oort, FLGo and APPFL by the fields and formulas their code uses)."""

from __future__ import annotations

import csv
import io
import json
import pickle
from argparse import Namespace

import numpy as np
import pytest

from understudy.rounds import DeviceStep, RoundConfig, RoundModel
from understudy.traces import TRACE_FORMATS, render, sample_trace

FLEET = [DeviceStep("rtx-3090", 50.0, 120), DeviceStep("t4", 120.0, 300), DeviceStep("inline-0123456789ab", 400.0, 80)]
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


def test_fedscales_own_client_manager_reads_the_pickle_and_gets_the_round_models_times(rounds, tmp_path):
    client_manager = pytest.importorskip("fedscale.cloud.client_manager", reason="pip install fedscale (test extra)")
    path = tmp_path / "device_info.pkl"
    path.write_bytes(render(sample_trace(rounds, clients=30, rounds=1, seed=5), "fedscale").body)
    with open(path, "rb") as fin:  # what Aggregator.load_client_profile does
        profiles = pickle.load(fin)
    manager = client_manager.ClientManager("random", Namespace(filter_less=0, filter_more=10**9,
                                                               device_avail_file=None))
    update_kbits = rounds.update_bytes / 1024 * 8  # FedScale's model_update_size
    for client_id, profile in profiles.items():
        manager.register_client(0, client_id, size=1000, speed=profile)
        cost = manager.get_completion_time(client_id, batch_size=32, local_steps=rounds.steps,
                                           upload_size=update_kbits, download_size=update_kbits)
        kind = next(k for k in rounds.kinds if k.compute_s == pytest.approx(cost["computation"]))
        assert cost["communication"] == pytest.approx(kind.download_s + kind.upload_s)
    assert sorted(profiles) == list(range(30))


def test_an_oort_trace_carries_durations_and_the_pacers_preferred_duration(rounds):
    trace = sample_trace(rounds, clients=40, rounds=3, seed=6)
    data = json.loads(render(trace, "oort", oort_threshold=30).body)
    durations = [data["clients"][cid]["duration"] for cid in data["clients"]]
    sorted_duration = sorted(durations)  # Oort's getTopK: the round_threshold-th percentile
    assert data["round_prefer_duration"] == sorted_duration[min(int(len(sorted_duration) * 30 / 100.),
                                                                len(sorted_duration) - 1)]
    nominal = trace.nominal("nominal_s")
    for r, feedbacks in enumerate(data["rounds"]):
        for cid, feedback in feedbacks.items():
            assert set(feedback) == {"reward", "duration", "time_stamp", "status"}
            assert feedback["duration"] == pytest.approx(nominal[int(cid)] * trace.factor[r, int(cid)])
            assert feedback["status"] == bool(trace.finished()[r, int(cid)])


def test_an_appfl_profile_reproduces_each_sampled_round_by_appfls_duration_formula(rounds):
    trace = sample_trace(rounds, clients=25, rounds=4, seed=7)
    data = json.loads(render(trace, "appfl").body)

    def appfl_duration(cps: float, steps: int, model_bytes: float, compute_factor: float, bandwidth: float) -> float:
        # appfl/vsim/client_profile.py: compute + download + upload at one bandwidth in decimal Mbps
        return cps * steps * compute_factor + 2 * model_bytes * 8 / (bandwidth * 1e6)

    for cid, profile in data["clients"].items():
        nominal = appfl_duration(profile["compute_second_per_step"], data["num_local_steps"], data["model_bytes"],
                                 profile["compute_factor"], profile["bandwidth"])
        assert nominal == pytest.approx(trace.nominal("nominal_s")[int(cid)])
        for r, this_round in enumerate(data["rounds"]):
            sampled = appfl_duration(profile["compute_second_per_step"], data["num_local_steps"],
                                     data["model_bytes"], this_round[cid]["compute_factor"],
                                     this_round[cid]["bandwidth"])
            assert sampled == pytest.approx(trace.times("nominal_s")[r, int(cid)])


def test_an_flgo_trace_sets_the_simulators_variables_and_latencies_in_ms(rounds):
    trace = sample_trace(rounds, clients=10, rounds=2, seed=8)
    data = json.loads(render(trace, "flgo").body)
    for variables in data["variables"].values():
        assert set(variables) == {"prob_available", "prob_unavailable", "prob_drop", "working_amount", "capacity"}
        assert variables["prob_available"] + variables["prob_unavailable"] == pytest.approx(1.0)
        assert variables["working_amount"] == 20
    latency = data["rounds"][1]["latency"]
    assert latency["3"] == round(trace.times("nominal_s")[1, 3] * 1000)


def test_the_csv_has_one_row_per_client_per_round_whose_parts_add_up(rounds):
    text = render(sample_trace(rounds, clients=7, rounds=3, seed=9), "csv").body.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 21
    for row in rows:
        parts = float(row["download_s"]) + float(row["compute_s"]) + float(row["upload_s"])
        assert parts == pytest.approx(float(row["total_s"]))
