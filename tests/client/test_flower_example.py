"""examples/fl_flower_deadline.py against a live service: a Flower federation on CPU whose clients take the time
Understudy predicts for their devices, run to completion by Flower's own server loop."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_flower_example_runs_a_deadline_aware_federation_to_completion(live, monkeypatch, capsys):
    pytest.importorskip("flwr", reason="scripts/install.sh installs flwr (without its pins) for this example")
    spec = importlib.util.spec_from_file_location("fl_flower_deadline", REPO / "examples" / "fl_flower_deadline.py")
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # its dataclasses look themselves up there
    spec.loader.exec_module(example)

    code = example.main(["--url", live.url, "--api-key", live.api_key, "--estimator", "analytic",
                         "--clients", "12", "--k", "3", "--rounds", "2", "--local-steps", "3"])

    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line.split() for line in out.splitlines() if line[:5].strip().isdigit()]
    assert [(row[0], row[1]) for row in rows] == [("1", "deadline-aware"), ("2", "deadline-aware"),
                                                  ("1", "random"), ("2", "random")]
    summary = {line.split(":")[0]: line for line in out.splitlines() if "rounds got K updates" in line}
    assert set(summary) == {"deadline-aware", "random"}
    met = {name: int(line.split(": ")[1].split(" of ")[0]) for name, line in summary.items()}
    assert met["deadline-aware"] >= met["random"]
