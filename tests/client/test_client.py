"""The `client` package against a live service (real HTTP, Postgres, Redis and a worker process; no mocks), and the
`understudy population` command and the FL example, which use it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
import typer
from tests.live_service import free_port
from typer.testing import CliRunner

from understudy.catalog import catalog
from client import (AsyncClient, Backoff, Band, Client, ConnectionFailed, InvalidRequest, Memory, NotFound,
                    Population, Prediction, PredictionRequest, Target, Unauthorized, WaitTimeout)
from understudy.results import Status
from understudy.workload import Workload

REPO = Path(__file__).resolve().parents[2]
SMALL = {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"}
VIT = {"model": "test_vit", "mode": "infer", "batch_size": 4, "resolution": 224, "precision": "fp32"}


def test_predict_waits_for_the_worker_and_returns_typed_results(live):
    with Client(live.url, live.api_key) as client:
        done = client.predict(SMALL, ["rtx-3090", "t4"], estimator="analytic", timeout=60)
        again = client.predict(Workload(**SMALL), ["RTX 3090", "t4"], estimator="analytic")

    assert isinstance(done, PredictionRequest) and done.final
    assert [p.target_id for p in done.data] == ["rtx-3090", "t4"]
    for prediction in done.data:
        assert isinstance(prediction, Prediction)
        assert prediction.status is Status.done
        assert prediction.latency_ms is not None and prediction.latency_ms > 0
        assert prediction.samples_per_s is not None and prediction.samples_per_s > 0
        assert prediction.estimator == "analytic" and prediction.host.host_class == "cpu"
        assert prediction.workload["model"] == "resnet18" and prediction.workload_digest == Workload(**SMALL).digest()
    assert again.cached and [p.id for p in again.data] == [p.id for p in done.data]
    assert done.by_target["t4"].latency_ms == again.by_target["t4"].latency_ms


def test_a_prediction_carries_its_interval_at_the_coverage_asked_and_its_memory_verdict(live):
    with Client(live.url, live.api_key) as client:
        [done] = client.predict(SMALL, ["rtx-3090"], estimator="analytic", timeout=60, coverage=0.9).data
        half = client.prediction(done.id, coverage=0.5)
        [listed] = client.history(request_id=done.request_id, coverage=0.6).data

    assert isinstance(done.memory, Memory) and isinstance(done.band, Band)
    assert (done.coverage, half.coverage, listed.coverage) == (0.9, 0.5, 0.6)
    assert done.latency_ms is not None and done.interval_ms is not None and half.interval_ms is not None
    low, high = done.band.multipliers
    assert done.interval_ms == (pytest.approx(done.latency_ms * low), pytest.approx(done.latency_ms * high))
    assert done.interval_ms[0] < half.interval_ms[0] < half.interval_ms[1] < done.interval_ms[1]
    assert (done.memory.verdict, done.memory.capacity_gb) == ("fits", 24.0)
    assert done.memory.summary == f"fits {done.memory.peak_gb:.1f} GB"


def test_the_async_client_asks_for_a_coverage_too(live):
    async def run() -> tuple[PredictionRequest, Prediction]:
        async with AsyncClient(live.url, live.api_key) as client:
            done = await client.predict(SMALL, "t4", estimator="analytic", timeout=60, coverage=0.95)
            return done, await client.prediction(done.data[0].id, coverage=0.5)

    done, half = asyncio.run(run())

    assert (done.data[0].coverage, half.coverage) == (0.95, 0.5)
    assert done.data[0].interval_ms is not None and half.interval_ms is not None
    assert done.data[0].interval_ms[0] < half.interval_ms[0]


def test_a_coverage_outside_half_to_95_percent_is_refused_naming_it(live):
    with Client(live.url, live.api_key) as client:
        with pytest.raises(InvalidRequest) as raised:
            client.predict(SMALL, ["rtx-3090"], estimator="analytic", coverage=0.99)

    assert raised.value.fields == ["coverage"]


def test_async_predict_runs_requests_concurrently_and_returns_the_same_types(live):
    async def run() -> list[PredictionRequest]:
        async with AsyncClient(live.url, live.api_key) as client:
            return list(await asyncio.gather(
                client.predict(VIT, ["l4", "rtx-4090"], estimator="analytic", timeout=60),
                client.predict({**VIT, "batch_size": 2}, "l4", estimator="analytic", timeout=60),
            ))

    first, second = asyncio.run(run())

    assert [p.status for p in first.data] == [Status.done, Status.done]
    assert [p.target_id for p in first.data] == ["l4", "rtx-4090"]
    assert second.data[0].status is Status.done and second.data[0].workload["batch_size"] == 2
    assert all(p.latency_ms > 0 for p in first.data + second.data)


def test_predict_without_waiting_then_waiting_later(live):
    live.pause_workers()
    with Client(live.url, live.api_key) as client:
        queued = client.predict(SMALL, ["l4"], estimator="analytic", wait=False)
        assert queued.data[0].status is Status.queued and not queued.final
        live.resume_workers()
        done = client.wait(queued, timeout=60)
        page = client.history(request_id=queued.request_id)

    assert done.data[0].status is Status.done and done.data[0].id == queued.data[0].id
    assert page.count == 1 and page.data[0].status is Status.done


def test_a_wait_past_the_timeout_raises_with_what_was_seen_last(live):
    live.pause_workers()  # nothing runs the job
    started = time.monotonic()
    with Client(live.url, live.api_key, backoff=Backoff(initial_s=0.05, max_s=0.2)) as client:
        with pytest.raises(WaitTimeout) as raised:
            client.predict(SMALL, ["rtx-2060", "rtx-2070"], estimator="analytic", timeout=0.6)
    elapsed = time.monotonic() - started

    assert 0.6 <= elapsed < 3
    assert isinstance(raised.value, TimeoutError)
    assert "2 of 2 prediction(s) not final after 0.6 s" in str(raised.value)
    assert [p.status for p in raised.value.last.data] == [Status.queued, Status.queued]

    async def run() -> None:
        async with AsyncClient(live.url, live.api_key) as client:
            await client.predict(SMALL, ["rtx-2060"], estimator="analytic", timeout=0.3)

    with pytest.raises(WaitTimeout):
        asyncio.run(run())


def test_a_422_is_raised_with_the_servers_reason_naming_the_field(live):
    with Client(live.url, live.api_key) as client:
        with pytest.raises(InvalidRequest) as bad_batch:
            client.predict({**SMALL, "batch_size": 0}, ["rtx-3090"])
        with pytest.raises(InvalidRequest) as bad_target:
            client.predict(SMALL, ["rtx-3090", "no-such-gpu"])
        with pytest.raises(InvalidRequest) as bad_device:
            client.population(SMALL, [{"target": "t4", "count": 1, "weight": 2.0}])

    assert bad_batch.value.status_code == 422
    assert "workload.batch_size" in str(bad_batch.value)
    assert bad_batch.value.fields == ["workload.batch_size"]
    assert "greater than or equal to 1" in bad_batch.value.errors[0].reason
    assert bad_target.value.fields == ["targets[1]"] and "no-such-gpu" in str(bad_target.value)
    assert bad_device.value.fields == ["devices[0]"]

    async def run() -> None:
        async with AsyncClient(live.url, live.api_key) as client:
            await client.predict({**SMALL, "model": "resnet_nope"}, ["t4"])

    with pytest.raises(InvalidRequest, match="workload.model"):
        asyncio.run(run())


def test_other_errors_carry_their_reason_too(live):
    with Client(live.url, "us_not-a-key") as client:
        with pytest.raises(Unauthorized, match="unknown or revoked"):
            client.predict(SMALL, ["t4"])
    with Client(live.url) as client:
        with pytest.raises(NotFound, match="no prediction with id 'nope'"):
            client.prediction("nope")
        with pytest.raises(NotFound):
            client.target("no-such-gpu")
    with Client(f"http://127.0.0.1:{free_port()}", timeout_s=2) as client:
        with pytest.raises(ConnectionFailed, match="cannot reach the service"):
            client.targets()


def test_history_filters_and_the_catalog(live):
    with Client(live.url, live.api_key) as client:
        client.predict(SMALL, ["rtx-3090", "t4", "l4"], estimator="analytic", timeout=60)
        by_latency = client.history(model="resnet18", sort="latency", order="asc")
        t4_only = client.history(target="t4", status="done")
        searched = client.history(q="Tesla")
        paged = client.history(limit=1, skip=1)
        targets = client.targets()
        one = client.target("RTX 3090")
        hosts = client.hosts()

    latencies = [p.latency_ms for p in by_latency.data]
    assert by_latency.count == 3 and latencies == sorted(latencies)
    assert [p.target_id for p in t4_only.data] == ["t4"]
    assert [p.target_id for p in searched.data] == ["t4"]  # "NVIDIA Tesla T4": the name is searched too
    assert paged.count == 3 and len(paged.data) == 1
    assert len(targets) == len(catalog()) and all(isinstance(t, Target) for t in targets)
    assert one.id == "rtx-3090" and one.sm_count == 82
    assert hosts == []


def test_population_sync_and_async(live):
    devices = {"rtx-3090": 3, "t4": 1}
    with Client(live.url, live.api_key) as client:
        result = client.population(SMALL, devices, k=[1, 2], estimator="analytic", timeout=60)

    async def run() -> Population:
        async with AsyncClient(live.url, live.api_key) as client:
            return await client.population(SMALL, {"rtx-3090": 0.75, "t4": 0.25}, k=2, estimator="analytic")

    weighted = asyncio.run(run())

    assert isinstance(result, Population) and result.status == "done" and result.weighting == "count"
    fast, slow = sorted(d.latency_ms for d in result.devices)
    share_fast = next(d.share for d in result.devices if d.latency_ms == fast)
    assert result.expected_round_ms(1) == pytest.approx(result.summary.mean_ms)
    assert result.expected_round_ms(2) == pytest.approx(fast * share_fast**2 + slow * (1 - share_fast**2))
    assert weighted.weighting == "weight"
    assert weighted.expected_round_ms(2) == pytest.approx(result.expected_round_ms(2))


def test_the_population_command_asks_the_service(live, monkeypatch):
    from cli.service import register

    cli = typer.Typer()
    register(cli)
    monkeypatch.setenv("UNDERSTUDY_URL", live.url)
    monkeypatch.setenv("UNDERSTUDY_API_KEY", live.api_key)
    runner = CliRunner()
    args = ["population", "resnet18", "--mode", "infer", "-b", "8", "-r", "64", "--precision", "fp32",
            "--estimator", "analytic", "-d", "rtx-3090=3", "-d", "t4=1", "-k", "1", "-k", "2"]

    shown = runner.invoke(cli, [*args, "--deadline-ms", "1000"])
    as_json = runner.invoke(cli, [*args, "--json"])
    bad = runner.invoke(cli, ["population", "resnet18", "-b", "0", "-d", "t4=1"])

    assert shown.exit_code == 0, shown.output
    assert "p50" in shown.output and "K=2: expected round time" in shown.output
    assert "meets 1000 ms with probability 1.000" in shown.output
    assert "any number of clients per round" in shown.output
    body = json.loads(as_json.stdout)
    assert body["status"] == "done" and [r["k"] for r in body["summary"]["round_time"]] == [1, 2]
    assert bad.exit_code == 2 and "workload.batch_size" in bad.output


def test_a_population_with_measurements_answers_the_measured_device_as_measured(live):
    with Client(live.url, live.api_key) as client:
        result = client.population(SMALL, {"rtx-3090": 3, "t4": 1}, estimator="analytic",
                                   measurements={"T4": 12.5}, timeout=60)

    t4 = next(d for d in result.devices if d.target_id == "t4")
    assert result.estimator == "calibrated" and [m["target"] for m in result.measurements] == ["t4"]
    assert t4.latency_ms == pytest.approx(12.5) and t4.calibration_id


def test_the_population_command_takes_measured_step_times(live, monkeypatch):
    from cli.service import register

    cli = typer.Typer()
    register(cli)
    monkeypatch.setenv("UNDERSTUDY_URL", live.url)
    monkeypatch.setenv("UNDERSTUDY_API_KEY", live.api_key)
    args = ["population", "resnet18", "--mode", "infer", "-b", "8", "-r", "64", "--precision", "fp32",
            "--estimator", "analytic", "-d", "rtx-3090=3", "-d", "t4=1"]

    measured = CliRunner().invoke(cli, [*args, "--measured", "t4=12.5", "--json"])
    bad = CliRunner().invoke(cli, [*args, "--measured", "t4"])

    assert measured.exit_code == 0, measured.output
    body = json.loads(measured.stdout)
    assert next(d["latency_ms"] for d in body["devices"] if d["target_id"] == "t4") == pytest.approx(12.5)
    assert bad.exit_code == 2 and "TARGET=MS" in bad.output


def test_the_fl_example_plans_rounds_against_the_service(live, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("fl_client_selection", REPO / "examples" / "fl_client_selection.py")
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # its dataclass looks itself up there
    spec.loader.exec_module(example)

    code = example.main(["--url", live.url, "--api-key", live.api_key, "--estimator", "analytic",
                         "--batch-size", "8", "--resolution", "64", "--local-steps", "10", "--deadline-s", "0.5"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert "expected round (s)" in out and out.count("\n") > 8
    for line in ("A. ", "B. ", "C. "):
        assert line in out
