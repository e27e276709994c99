"""The sweep benchmark resumed (`benchmarks/sweep/run.py --resume`): a second run keeps the first run's in-process
sweep and the fresh processes it ran, and runs a fresh process only for the targets the first run's budget skipped.
One fresh process is replaced by a recorder; nothing here needs a GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.scripts import load_script


@pytest.fixture
def sweep() -> ModuleType:
    return load_script("benchmarks/sweep/run.py")


def first_run(path: Path) -> Path:
    """What a first run left: (a) on both targets, (b) on the first only, the second skipped by the budget."""
    in_process = {"status": "done", "process_wall_s": 50.0, "predict_s": 40.0,
                  "targets": {target: {"status": "done", "latency_ms": 10.0, "setting_wall_s": 1.0}
                              for target in ("rtx-4060", "rtx-4090")},
                  "settings": [{"setting": "24 SMs", "targets": ["rtx-4060"], "wall_s": 30.0},
                               {"setting": "128 SMs", "targets": ["rtx-4090"], "wall_s": 1.0}]}
    report = {"command": "python3 run.py --budget-s 1", "date": "then", "workload": {}, "estimator": "spec",
              "targets": ["rtx-4060", "rtx-4090"], "timed_windows": "3", "window_ms": "20",
              "in_process": in_process, "wall_s": 100.0,
              "processes": {"targets": {"rtx-4060": {"status": "done", "latency_ms": 10.5, "wall_s": 35.0},
                                        "rtx-4090": {"status": "skipped", "error": "past its budget"}}}}
    path.write_text(json.dumps(report))
    return path


def test_a_resumed_sweep_runs_only_the_skipped_processes_and_keeps_the_rest(
    sweep: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def one_process(target: str, *_: Any) -> dict[str, Any]:
        ran.append(target)
        return {"status": "done", "latency_ms": 9.5, "wall_s": 36.0}

    def no_in_process(*_: Any) -> dict[str, Any]:
        raise AssertionError("a resumed sweep does not run (a) again")

    monkeypatch.setattr(sweep, "one_process", one_process)
    monkeypatch.setattr(sweep, "run_in_process", no_in_process)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["run.py", "--resume", str(first_run(tmp_path / "sweep.json")),
                                      "--out", str(out)])

    assert sweep.main() == 0

    report = json.loads((out / "sweep.json").read_text())
    assert ran == ["rtx-4090"]
    assert report["processes"]["targets"]["rtx-4060"]["latency_ms"] == 10.5
    assert report["summary"]["processes_run"] == 2
    assert report["summary"]["processes_wall_s"] == 71.0
    assert report["summary"]["speedup"] == pytest.approx(71.0 / 50.0)
    assert report["wall_s"] >= 100.0
    assert report["command"].startswith("python3 run.py --budget-s 1; then ")
