"""Every prediction the API answers carries its interval (the error band at a coverage the caller may choose, 0.5 to
0.95, 0.8 by default) and whether the workload fits the target's memory; the OpenAPI schema documents both. The
expected intervals are read from each answer's own band, never from the shipped band model's numbers."""

from __future__ import annotations

import pytest

from .helpers import predict_body, run_queued_jobs


def done_prediction(client, auth, redis) -> str:  # type: ignore[no-untyped-def]
    created = client.post("/v1/predictions", json=predict_body(["rtx-3090"]), headers=auth)
    run_queued_jobs(redis)
    return created.json()["data"][0]["id"]


def test_a_done_prediction_answers_its_interval_band_and_memory_verdict(client, auth, redis):
    body = client.get(f"/v1/predictions/{done_prediction(client, auth, redis)}").json()

    latency = body["latency"]["min_ms"]
    low, high = body["band"]["multipliers"]
    assert body["coverage"] == 0.8
    assert body["interval_ms"] == [pytest.approx(latency * low), pytest.approx(latency * high)]
    assert low < high
    assert body["band"]["basis"].startswith("analytic infer, Ampere")
    memory = body["memory"]
    assert (memory["verdict"], memory["capacity_gb"]) == ("fits", 24.0)
    assert memory["low_gb"] <= memory["peak_gb"] <= memory["high_gb"]
    assert memory["summary"] == f"fits {memory['peak_gb']:.1f} GB"
    assert "band" not in body["details"] and "memory" not in body["details"]


def test_the_coverage_parameter_sets_the_interval_of_one_prediction(client, auth, redis):
    prediction_id = done_prediction(client, auth, redis)
    default = client.get(f"/v1/predictions/{prediction_id}").json()  # this one is remembered (app.finished)

    half = client.get(f"/v1/predictions/{prediction_id}", params={"coverage": 0.5}).json()
    most = client.get(f"/v1/predictions/{prediction_id}", params={"coverage": 0.95}).json()

    assert (half["coverage"], most["coverage"]) == (0.5, 0.95)
    assert most["interval_ms"][0] < default["interval_ms"][0] < half["interval_ms"][0] < half["interval_ms"][1]
    assert half["interval_ms"][1] < default["interval_ms"][1] < most["interval_ms"][1]
    assert half["interval_ms"][0] == pytest.approx(half["latency"]["min_ms"] * half["band"]["multipliers"][0])


def test_the_coverage_parameter_sets_the_interval_of_every_prediction_in_the_history(client, auth, redis):
    client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4"]), headers=auth)
    run_queued_jobs(redis)

    page = client.get("/v1/predictions", params={"coverage": 0.9}).json()

    assert [item["coverage"] for item in page["data"]] == [0.9, 0.9]
    for item in page["data"]:
        low, high = item["band"]["multipliers"]
        assert item["interval_ms"] == [pytest.approx(item["latency"]["min_ms"] * low),
                                       pytest.approx(item["latency"]["min_ms"] * high)]


def test_a_post_answers_at_the_coverage_its_body_asks(client, auth, redis):
    client.post("/v1/predictions", json=predict_body(), headers=auth)
    run_queued_jobs(redis)
    default = client.post("/v1/predictions", json=predict_body(), headers=auth).json()["data"][0]

    # Asked again: answered from what this process remembers, at the coverage of this request.
    again = client.post("/v1/predictions", json=predict_body() | {"coverage": 0.6}, headers=auth)

    assert again.status_code == 200 and again.json()["cached"] is True
    [prediction] = again.json()["data"]
    assert prediction["id"] == default["id"] and prediction["coverage"] == 0.6
    assert default["interval_ms"][0] < prediction["interval_ms"][0] < prediction["interval_ms"][1] < (
        default["interval_ms"][1])


def test_a_queued_prediction_has_no_interval_or_verdict_yet(client, auth):
    [prediction] = client.post("/v1/predictions", json=predict_body(), headers=auth).json()["data"]

    assert prediction["status"] == "queued"
    assert (prediction["interval_ms"], prediction["band"], prediction["memory"]) == (None, None, None)
    assert prediction["coverage"] == 0.8


@pytest.mark.parametrize("coverage", ["0.49", "0.96", "1", "nan", "most"])
def test_a_coverage_query_outside_half_to_95_percent_is_422_naming_it(client, auth, redis, coverage):
    prediction_id = done_prediction(client, auth, redis)

    for path in (f"/v1/predictions/{prediction_id}", "/v1/predictions"):
        answer = client.get(path, params={"coverage": coverage})
        assert answer.status_code == 422, path
        assert [error["field"] for error in answer.json()["errors"]] == ["coverage"]


@pytest.mark.parametrize("coverage", [0.3, 0.99, 1.5])
def test_a_coverage_in_the_body_outside_half_to_95_percent_is_422_naming_it(client, auth, coverage):
    answer = client.post("/v1/predictions", json=predict_body() | {"coverage": coverage}, headers=auth)

    assert answer.status_code == 422
    assert [error["field"] for error in answer.json()["errors"]] == ["coverage"]


def test_the_openapi_schema_documents_the_interval_the_coverage_and_the_memory_verdict(client):
    spec = client.get("/openapi.json").json()

    public = spec["components"]["schemas"]["PredictionPublic"]["properties"]
    for field in ("interval_ms", "coverage", "band", "memory"):
        assert public[field].get("description"), field
    memory = spec["components"]["schemas"]["MemoryPublic"]["properties"]
    assert memory["verdict"]["enum"] == ["fits", "tight", "oom"] and memory["verdict"]["description"]
    created = spec["components"]["schemas"]["PredictionCreate"]["properties"]["coverage"]
    assert (created["minimum"], created["maximum"], created["default"]) == (0.5, 0.95, 0.8)
    for path in ("/v1/predictions", "/v1/predictions/{prediction_id}"):
        [coverage] = [p for p in spec["paths"][path]["get"]["parameters"] if p["name"] == "coverage"]
        assert coverage["description"] and coverage["schema"]["maximum"] == 0.95
