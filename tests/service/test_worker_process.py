"""The real worker (`understudy worker`) in a subprocess: it runs jobs, holds its GPU alone, and what it was running
when killed completes on the next worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from understudy.estimator_info import estimator_info
from ledger.models import Host, Prediction

from tests.waiting import alive, children_of, wait_for

from .helpers import predict_body

SLOWJOB = Path(__file__).parent / "slowjob"


def start_worker(*args: str, slow_s: float = 0.0) -> subprocess.Popen:
    env = dict(os.environ)
    if slow_s:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SLOWJOB), env.get("PYTHONPATH")]))
        env["UNDERSTUDY_TEST_PREDICT_DELAY_S"] = str(slow_s)
    return subprocess.Popen([sys.executable, "-m", "cli.main", "worker", "--gpu", "0", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def row(db, prediction_id: str) -> Prediction:
    with Session(db) as session:
        return session.scalars(select(Prediction).where(Prediction.id == prediction_id)).one()


@pytest.fixture
def workers():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def test_a_burst_worker_runs_a_post_and_registers_its_host(client, auth, db, workers):
    created = client.post("/v1/predictions", json=predict_body(["rtx-3090", "t4"]), headers=auth)
    workers.append(worker := start_worker("--burst"))

    output, _ = worker.communicate(timeout=120)

    assert worker.returncode == 0, output
    for item in created.json()["data"]:
        polled = client.get(f"/v1/predictions/{item['id']}").json()
        assert polled["status"] == "done", polled
        assert polled["host"]["worker"] == "testbox:gpu0"  # its slot, never its token
    with Session(db) as session:
        host = session.get(Host, "testbox:gpu0")
    assert host is not None and host.info["gpu_index"] == 0
    assert host.info["estimators"]["analytic"] == {"version": estimator_info("analytic").version, "needs_gpu": False}


def test_a_prediction_names_its_worker_as_the_hosts_list_does(client, auth, workers):
    created = client.post("/v1/predictions", json=predict_body(["t4"]), headers=auth)
    workers.append(worker := start_worker("--burst"))
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, output

    polled = client.get(f"/v1/predictions/{created.json()['data'][0]['id']}").json()
    hosts = client.get("/v1/hosts").json()["data"]
    assert polled["host"]["worker"] == "testbox:gpu0"
    assert [host["id"] for host in hosts] == ["testbox:gpu0"]


def test_a_worker_without_a_gpu_advertises_only_what_it_can_run(db, workers):
    workers.append(worker := start_worker("--burst"))
    output, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, output

    with Session(db) as session:
        host = session.get(Host, "testbox:gpu0")
    assert host is not None
    if host.gpu_name is not None:
        pytest.skip("this machine has a GPU: its worker runs every estimator")
    assert set(host.info["estimators"]) == {"analytic", "calibrated"}


def registered(db) -> bool:
    with Session(db) as session:
        return session.get(Host, "testbox:gpu0") is not None


def check_worker(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", "worker", "--check", "--gpu", "0"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_a_second_worker_for_the_same_gpu_waits_for_the_first(db, workers):
    workers.append(first := start_worker())
    wait_for(lambda: registered(db), 60, "the first worker to register")

    workers.append(second := start_worker("--burst", "--wait", "1"))
    output, _ = second.communicate(timeout=60)

    assert second.returncode == 1
    assert "is held by another worker" in output
    assert first.poll() is None


def test_the_healthcheck_passes_while_the_worker_runs_and_fails_after_it_stops(db, workers):
    workers.append(worker := start_worker())
    wait_for(lambda: registered(db), 60, "the worker to register")

    running = check_worker()
    worker.send_signal(signal.SIGTERM)  # warm shutdown: it gives its GPU lock back
    worker.wait(timeout=30)
    # Its last heartbeat still counts as fresh under a long TTL, so what fails is the lock it gave back.
    stopped = check_worker(UNDERSTUDY_LOCK_TTL_S="600")

    assert running.returncode == 0, running.stdout + running.stderr
    assert stopped.returncode == 1
    assert "does not hold its GPU lock" in stopped.stdout + stopped.stderr


def test_a_job_whose_worker_is_killed_mid_job_completes_on_the_next_worker(client, auth, db, workers):
    created = client.post("/v1/predictions", json=predict_body(), headers=auth)
    prediction_id = created.json()["data"][0]["id"]
    workers.append(first := start_worker(slow_s=60))
    wait_for(lambda: row(db, prediction_id).status == "running", 90, "the first worker to start the job")
    jobs = children_of(first.pid)
    assert jobs, "the job runs in a process of its own"
    first_worker_id = row(db, prediction_id).worker_id

    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)

    wait_for(lambda: not any(alive(pid) for pid in jobs), 10, "the job process to die with its worker")
    workers.append(second := start_worker("--burst"))
    output, _ = second.communicate(timeout=120)
    assert second.returncode == 0, output
    finished = row(db, prediction_id)
    assert finished.status == "done"
    assert finished.attempts == 2
    assert finished.worker_id != first_worker_id


def measuring_processes(worker: subprocess.Popen) -> list[int]:
    return [pid for pid in children_of(worker.pid) if alive(pid)]


def test_a_workers_jobs_run_one_after_another_in_one_warm_measuring_process(client, auth, db, workers):
    workers.append(worker := start_worker())
    wait_for(lambda: registered(db), 60, "the worker to register")
    first = client.post("/v1/predictions", json=predict_body(), headers=auth).json()["data"][0]["id"]
    wait_for(lambda: row(db, first).status == "done", 120, "the first job")
    before = measuring_processes(worker)

    second = client.post("/v1/predictions", json=predict_body(batch_size=9), headers=auth).json()["data"][0]["id"]
    wait_for(lambda: row(db, second).status == "done", 120, "the second job")

    assert len(before) == 1
    assert measuring_processes(worker) == before


def test_a_measuring_process_that_dies_mid_job_fails_its_rows_with_the_reason_and_is_replaced(
        client, auth, db, workers):
    workers.append(worker := start_worker(slow_s=60))
    wait_for(lambda: registered(db), 60, "the worker to register")
    prediction_id = client.post("/v1/predictions", json=predict_body(), headers=auth).json()["data"][0]["id"]
    wait_for(lambda: row(db, prediction_id).status == "running", 120, "the job to start")
    (dead,) = measuring_processes(worker)

    os.kill(dead, signal.SIGKILL)

    wait_for(lambda: row(db, prediction_id).status == "failed", 30, "the job's rows to fail")
    assert row(db, prediction_id).error.startswith("the job's process died (exit status -9, signal 9)")
    wait_for(lambda: len(measuring_processes(worker)) == 1 and dead not in measuring_processes(worker), 30,
             "a new measuring process")
    assert worker.poll() is None
