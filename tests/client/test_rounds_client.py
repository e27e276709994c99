"""The client's population_rounds and population_trace, and `understudy population --trace`, against a live
service."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pickle
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from client import AsyncClient, Client, InvalidRequest, PopulationRounds
from understudy.links import Link
from understudy.rounds import RoundConfig

REPO = Path(__file__).resolve().parents[2]
SMALL = {"model": "resnet18", "mode": "train", "batch_size": 8, "resolution": 64, "precision": "fp32"}


def test_rounds_and_traces_sync_and_async(live):
    config = RoundConfig(local_steps=5, sigma=0.1, links={"consumer": Link(down_mbps=100, up_mbps=50)})
    with Client(live.url, live.api_key) as client:
        population = client.population(SMALL, {"rtx-3090": 3, "t4": 1}, estimator="analytic", timeout=60)
        rounds = client.population_rounds(population.id, k=[2, 4], deadline_s=60, config=config)
        trace = client.population_trace(population.id, format="oort", clients=5, rounds=2, seed=1, config=config)
        with pytest.raises(InvalidRequest) as refused:
            client.population_trace(population.id, config={"dropout": 1.5})

    async def run() -> tuple[PopulationRounds, bytes]:
        async with AsyncClient(live.url, live.api_key) as client:
            return (await client.population_rounds(population.id, k=[2, 4], deadline_s=60, config=config),
                    await client.population_trace(population.id, format="oort", clients=5, rounds=2, seed=1,
                                                  config=config))

    rounds_async, trace_async = asyncio.run(run())

    assert isinstance(rounds, PopulationRounds) and rounds.local_steps == 5
    rtx = next(kind for kind in rounds.kinds if kind.target_id == "rtx-3090")
    assert (rtx.down_mbps, rtx.up_mbps) == (100, 50) and rtx.sigma == 0.1
    assert rounds.outcome(4).expected_round_s >= rounds.outcome(2).expected_round_s
    assert rounds_async == rounds and trace_async == trace
    assert [client["client_id"] for client in json.loads(trace)["clients"]] == [0, 1, 2, 3, 4]
    assert "dropout" in refused.value.fields


def test_the_population_command_writes_a_fedscale_trace(live, monkeypatch, tmp_path):
    from cli.service import register

    cli = typer.Typer()
    register(cli)
    monkeypatch.setenv("UNDERSTUDY_URL", live.url)
    monkeypatch.setenv("UNDERSTUDY_API_KEY", live.api_key)
    out = tmp_path / "device_info.pkl"
    args = ["population", "resnet18", "-b", "8", "-r", "64", "--precision", "fp32", "--estimator", "analytic",
            "-d", "rtx-3090=3", "-d", "t4=1", "--trace", "fedscale", "--clients", "12", "--local-steps", "5"]

    written = CliRunner().invoke(cli, [*args, "--out", str(out)])
    without_out = CliRunner().invoke(cli, args)

    assert written.exit_code == 0, written.output
    assert "fedscale trace of 12 clients" in written.output
    assert sorted(pickle.loads(out.read_bytes())) == list(range(12))
    assert without_out.exit_code == 2 and "--out" in without_out.output


README = REPO / "README.md"
PRINTS = "<!-- examples/fl_client_selection.py prints -->\n```text\n"


def test_the_readme_shows_what_the_client_selection_example_prints(live, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("fl_client_selection", REPO / "examples" / "fl_client_selection.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # its dataclasses look themselves up there
    spec.loader.exec_module(example)

    code = example.main(["--url", live.url, "--api-key", live.api_key, "--estimator", "analytic"])

    printed = capsys.readouterr().out
    assert code == 0, printed
    head, rest = README.read_text().split(PRINTS)
    shown, tail = rest.split("\n```\n", 1)
    if os.environ.get("UNDERSTUDY_UPDATE_README") == "1":
        README.write_text(f"{head}{PRINTS}{printed.rstrip()}\n```\n{tail}")
    else:
        assert printed.rstrip() == shown, ("README.md's output of examples/fl_client_selection.py is stale: run this "
                                           "test with UNDERSTUDY_UPDATE_README=1 to rewrite it")
