"""A worker killed with SIGKILL mid-job: the job completes on the next worker, and the GPU restrictions the dead job
held (a core clock lock, an MPS daemon) are released when that next worker starts, before it runs anything.

The GPU is tests/faults/fakegpu/pynvml.py (its state in a file, so it outlives the processes that change it) and the
MPS control program is tests/fakes.FakeMpsControl, which logs every command with its pipe folder.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.fakes import FakeMpsControl
from tests.waiting import alive, children_of

from .helpers import FAKE_GPU, REPO, start_worker, status_of, wait_for


def fake_gpu_env(tmp_path: Path, control: FakeMpsControl) -> dict[str, str]:
    return {"FAKE_NVML_STATE": str(tmp_path / "nvml.json"), "UNDERSTUDY_ALLOW_CLOCK_LOCK": "true",
            "UNDERSTUDY_MPS_CONTROL": str(control.path), "UNDERSTUDY_RUN_DIR": str(tmp_path / "run")}


def nvml_state(tmp_path: Path) -> dict:
    path = tmp_path / "nvml.json"
    return json.loads(path.read_text()) if path.exists() else {"locked_mhz": None, "events": []}


def test_a_killed_workers_job_completes_on_the_next_worker_which_first_releases_the_gpu(
        client, auth, db, workers, tmp_path):
    control = FakeMpsControl(tmp_path)
    env = fake_gpu_env(tmp_path, control)
    created = client.post("/v1/predictions", json={
        "workload": {"model": "resnet18", "mode": "infer", "batch_size": 8, "resolution": 64, "precision": "fp32"},
        "targets": ["rtx-3090"], "estimator": "analytic"}, headers=auth)
    prediction_id = created.json()["data"][0]["id"]

    workers.append(first := start_worker(env={**env, "UNDERSTUDY_TEST_GPU_JOB_S": "60"}, paths=(FAKE_GPU, REPO)))
    wait_for(lambda: status_of(db, [prediction_id])[prediction_id] == "running", 90, "the first worker's job")
    wait_for(lambda: control.commands() == ["start"], 30, "the job to start its MPS daemon")
    jobs = children_of(first.pid)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    wait_for(lambda: not any(alive(pid) for pid in jobs), 10, "the job process to die with its worker")

    # What the dead job left: the clock locked at 1005 MHz and its MPS daemon, in the GPU's folder of the run dir.
    assert nvml_state(tmp_path)["locked_mhz"] == 1005
    (daemon,) = control.entries()
    pipe = Path(daemon["pipe"])
    assert pipe.parent.parent == tmp_path / "run" / "gpu0" / "mps"

    workers.append(second := start_worker("--burst", env=env, paths=(FAKE_GPU, REPO)))
    output, _ = second.communicate(timeout=120)

    assert second.returncode == 0, output
    assert status_of(db, [prediction_id]) == {prediction_id: "done"}
    assert client.get(f"/v1/predictions/{prediction_id}").json()["attempts"] == 2
    # The first thing to touch the clock after the dead job locked it was the second worker itself, at start-up (its
    # own pid), before any job of its own ran.
    state = nvml_state(tmp_path)
    assert state["locked_mhz"] is None
    events = [(event["event"], event["pid"]) for event in state["events"]]
    locked_at = events.index(next(event for event in events if event[0] == "lock"))
    assert events[locked_at + 1] == ("reset", second.pid)
    # ... and quit the daemon the dead job left, through its own pipe folder, then removed the folder.
    assert control.commands() == ["start", "quit"]
    assert control.entries()[1]["pipe"] == str(pipe)
    assert not pipe.parent.exists()
    assert "left by a worker that did not stop cleanly" in output


# The start-up release on its own (in this process, with tests/fakes' NVML and MPS control) -----------------------


def leftover_daemon(run_dir: Path) -> Path:
    root = run_dir / "gpu0" / "mps" / "understudy-mps-left"
    (root / "pipe").mkdir(parents=True)
    return root


def test_the_clock_is_reset_only_where_clock_locks_are_allowed(tmp_path, monkeypatch):
    from tests.fakes import FakeNvml, make_settings

    from worker.main import release_leftovers

    nvml = FakeNvml(locked_mhz=1005)
    monkeypatch.setattr("engine.probe.load_nvml", lambda: nvml)

    assert release_leftovers(make_settings(run_dir=str(tmp_path)), 0, has_gpu=True) == []
    assert nvml.locked_mhz == 1005  # not ours to touch: the operator did not allow clock locks
    assert release_leftovers(make_settings(run_dir=str(tmp_path), allow_clock_lock=True), 0, has_gpu=True) == [
        "core clock lock reset"]
    assert nvml.locked_mhz is None


def test_a_leftover_daemon_is_quit_through_its_own_pipe_folder_and_its_folder_removed(tmp_path):
    from tests.fakes import make_settings

    from worker.main import release_leftovers

    control = FakeMpsControl(tmp_path)
    root = leftover_daemon(tmp_path / "run")
    settings = make_settings(run_dir=str(tmp_path / "run"), mps_control=str(control.path))

    released = release_leftovers(settings, 0, has_gpu=True)

    assert released == [f"MPS daemon quit ({root})"]
    assert [(e["stdin"].strip(), e["pipe"]) for e in control.entries()] == [("quit", str(root / "pipe"))]
    assert not root.exists()
    assert release_leftovers(settings, 0, has_gpu=True) == []  # nothing left the second time


def test_another_gpus_daemon_is_left_alone(tmp_path):
    from tests.fakes import make_settings

    from worker.main import release_leftovers

    control = FakeMpsControl(tmp_path)
    root = leftover_daemon(tmp_path / "run")
    settings = make_settings(run_dir=str(tmp_path / "run"), mps_control=str(control.path))

    assert release_leftovers(settings, 1, has_gpu=True) == []
    assert root.exists() and control.entries() == []


def test_without_an_mps_control_program_a_leftover_folder_is_still_removed(tmp_path):
    from tests.fakes import make_settings

    from worker.main import release_leftovers

    root = leftover_daemon(tmp_path / "run")
    settings = make_settings(run_dir=str(tmp_path / "run"), mps_control=str(tmp_path / "no-such-program"))

    assert release_leftovers(settings, 0, has_gpu=True) == []
    assert not root.exists()


def test_a_jobs_mps_daemon_goes_into_the_folder_its_worker_named(tmp_path, monkeypatch):
    from engine.restrict import ENV_MPS_DIR, MpsDaemon

    monkeypatch.setenv(ENV_MPS_DIR, str(tmp_path / "run" / "gpu0" / "mps"))

    daemon = MpsDaemon("nvidia-cuda-mps-control")

    assert daemon.root.parent == tmp_path / "run" / "gpu0" / "mps"
    assert daemon.root.name.startswith("understudy-mps-")
