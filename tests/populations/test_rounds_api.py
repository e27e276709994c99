"""GET /v1/populations/{id}/rounds and /trace against a live service: the round model over the population's
reported step times, and trace files an FL simulator reads."""

from __future__ import annotations

import pickle
from typing import Any

import httpx
import pytest
from tests.live_service import LiveService
from tests.waiting import wait_for

from understudy.rounds import DeviceStep, RoundConfig, RoundModel
from understudy.steps import LAUNCH_US

WORKLOAD = {"model": "resnet18", "mode": "train", "batch_size": 8, "resolution": 64, "precision": "fp32"}
DEVICES = [{"target": "rtx-3090", "count": 6}, {"target": "t4", "count": 3}]
RESNET18_PARAMS = 11_689_512  # timm's resnet18 with 1000 classes


def done_population(live: LiveService) -> dict[str, Any]:
    created = httpx.post(f"{live.url}/v1/populations", json={"workload": WORKLOAD, "devices": DEVICES,
                                                              "estimator": "analytic"},
                         headers={"X-API-Key": live.api_key}, timeout=30)
    assert created.status_code in (200, 202), created.text
    population_id = created.json()["id"]

    def final() -> dict[str, Any] | None:
        body = httpx.get(f"{live.url}/v1/populations/{population_id}", timeout=30).json()
        return body if body["status"] in ("done", "failed") else None

    population = wait_for(final, 60, f"population {population_id}", interval_s=0.1)
    assert population["status"] == "done"
    return population


def test_the_rounds_are_the_round_model_over_the_reported_step_times(live):
    population = done_population(live)
    params = {"k": [1, 5], "local_steps": 10, "sigma": 0.2, "overcommit": 1.3, "dropout": 0.1, "deadline_s": 12,
              "link": ["t4=200/100"]}

    answer = httpx.get(f"{live.url}/v1/populations/{population['id']}/rounds", params=params, timeout=30)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    config = RoundConfig(local_steps=10, sigma=0.2, overcommit=1.3, dropout=0.1,
                         links={"t4": {"down_mbps": 200, "up_mbps": 100}})
    kernels = {d["target_id"]: kernel_launches(live, d["prediction_id"]) for d in population["devices"]}
    kinds = {"rtx-3090": "consumer", "t4": "datacenter"}
    expected = RoundModel([DeviceStep(d["target_id"], d["latency_ms"], d["weight"], kinds[d["target_id"]],
                                      kernels=kernels[d["target_id"]]) for d in population["devices"]],
                          batch_size=8, param_count=RESNET18_PARAMS, config=config)
    assert body["update_bytes"] == RESNET18_PARAMS * 4 and body["local_steps"] == 10
    t4 = next(kind for kind in body["kinds"] if kind["target_id"] == "t4")
    assert (t4["device_kind"], t4["down_mbps"], t4["up_mbps"]) == ("datacenter", 200, 100)
    assert t4["download_s"] == pytest.approx(RESNET18_PARAMS * 4 * 8 / 200e6)
    assert t4["step_ms"] == pytest.approx(max(t4["gpu_ms"], kernels["t4"] * LAUNCH_US / 1000))
    for outcome in body["rounds"]:
        k = outcome["k"]
        assert outcome["sampled"] == config.sampled(k)
        assert outcome["expected_round_s"] == pytest.approx(expected.expected_round_s(k))
        assert outcome["p_deadline"] == pytest.approx(expected.deadline(k, 12).p_complete)
    assert [curve["k"] for curve in body["deadline_curves"]] == [1, 5]


def kernel_launches(live: LiveService, prediction_id: str) -> int:
    """The step's kernel launches the worker stored with its prediction."""
    answer = httpx.get(f"{live.url}/v1/predictions/{prediction_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["details"]["kernels"])


def test_a_trace_downloads_as_the_format_asked_and_the_same_seed_gives_the_same_file(live):
    population = done_population(live)
    url = f"{live.url}/v1/populations/{population['id']}/trace"
    params = {"format": "fedscale", "clients": 20, "rounds": 3, "seed": 11, "local_steps": 10}

    first = httpx.get(url, params=params, timeout=30)
    again = httpx.get(url, params=params, timeout=30)
    other_seed = httpx.get(url, params={**params, "seed": 12}, timeout=30)
    as_csv = httpx.get(url, params={**params, "format": "csv"}, timeout=30)

    assert first.status_code == 200, first.text
    assert first.headers["content-disposition"].endswith('.fedscale.pkl"')
    assert first.content == again.content != other_seed.content
    profiles = pickle.loads(first.content)
    assert sorted(profiles) == list(range(20))
    assert all(set(profile) == {"computation", "communication"} for profile in profiles.values())
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert as_csv.text.count("\n") == 1 + 20 * 3


def test_a_fedscale_availability_trace_follows_the_availability_asked(live):
    population = done_population(live)
    url = f"{live.url}/v1/populations/{population['id']}/trace"
    params = {"format": "fedscale_avail", "clients": 20, "rounds": 3, "seed": 11}

    always = httpx.get(url, params=params, timeout=30)
    sometimes = httpx.get(url, params={**params, "availability": 0.5, "dropout": 0.2}, timeout=30)

    assert always.status_code == sometimes.status_code == 200
    assert always.headers["content-disposition"].endswith('.fedscale_avail.pkl"')
    assert always.content != sometimes.content
    assert all(len(entry["active"]) == 1 for entry in pickle.loads(always.content).values())


def test_a_populations_workload_trains_in_fp32_unless_it_says_otherwise_and_the_schema_says_so(live):
    created = httpx.post(f"{live.url}/v1/populations",
                         json={"workload": {"model": "resnet18", "batch_size": 4, "resolution": 32},
                               "devices": DEVICES, "estimator": "analytic"},
                         headers={"X-API-Key": live.api_key}, timeout=30)
    schema = httpx.get(f"{live.url}/openapi.json", timeout=30).json()["components"]["schemas"]

    assert created.status_code in (200, 202), created.text
    assert created.json()["workload"]["precision"] == "fp32"
    assert schema["PopulationWorkload"]["properties"]["precision"]["default"] == "fp32"
    assert "fp32" in schema["PopulationWorkload"]["properties"]["precision"]["description"]


@pytest.mark.parametrize(("params", "field"), [
    ({"link": ["t4=fast"]}, "link"),
    ({"epochs": 1}, "epochs and samples go together"),
    ({"clients": 10_000, "rounds": 1000}, "at most 200,000"),
    ({"format": "tensorboard"}, "format"),
])
def test_unusable_round_parameters_get_422_naming_them(live, params, field):
    population = done_population(live)

    answer = httpx.get(f"{live.url}/v1/populations/{population['id']}/trace", params=params, timeout=30)

    assert answer.status_code == 422
    assert field in answer.text


def test_a_population_still_running_has_no_rounds_yet_and_an_unknown_one_is_404(live):
    live.pause_workers()
    created = httpx.post(f"{live.url}/v1/populations",
                         json={"workload": {**WORKLOAD, "batch_size": 9}, "devices": DEVICES, "estimator": "analytic"},
                         headers={"X-API-Key": live.api_key}, timeout=30).json()

    queued = httpx.get(f"{live.url}/v1/populations/{created['id']}/rounds", timeout=30)
    missing = httpx.get(f"{live.url}/v1/populations/nope/trace", timeout=30)
    live.resume_workers()

    assert queued.status_code == 409 and "is queued" in queued.json()["detail"]
    assert missing.status_code == 404
