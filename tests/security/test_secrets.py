"""A job process's command line, which every user of the machine can read (/proc/PID/cmdline), holds no secret: rq's
SpawnWorker would write the Redis connection, password included, there. Against a password-protected Redis of the
test's own and the real worker: the job process's command line holds no password."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from ledger.dispatch import enqueue
from ledger.models import Prediction

from tests.waiting import children_of

from .helpers import body

PASSWORD = "s3cret-for-the-test-only"
SLOWJOB = Path(__file__).resolve().parents[1] / "service" / "slowjob"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def guarded_redis() -> Iterator[str]:
    """A Redis server of this test's own, with a password (given as configuration on stdin, not as an argument)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    server = subprocess.Popen(["redis-server", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    assert server.stdin is not None
    server.stdin.write(f"port {port}\nbind 127.0.0.1\nrequirepass {PASSWORD}\nsave \"\"\nappendonly no\n".encode())
    server.stdin.close()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            Redis.from_url(url).ping()
            break
        except RedisError:  # not up yet
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)
    yield url
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=10)


def test_a_job_process_has_no_password_on_its_command_line(client, db, settings, keys, configure, guarded_redis):
    created = client.post("/v1/predictions", json=body(), headers=keys.a).json()["data"][0]["id"]
    with Session(db) as session:
        job_id = session.get(Prediction, created).job_id
    enqueue(Redis.from_url(guarded_redis), settings, queue="cpu", prediction_ids=[created], job_id=job_id)
    env = {**os.environ, "REDIS_URL": guarded_redis, "UNDERSTUDY_TEST_PREDICT_DELAY_S": "60",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SLOWJOB), os.environ.get("PYTHONPATH")]))}
    worker = subprocess.Popen([sys.executable, "-m", "cli.main", "worker", "--gpu", "0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            with Session(db) as session:
                if session.get(Prediction, created).status == "running":
                    break
            assert worker.poll() is None, "the worker exited"
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.1)
        jobs = children_of(worker.pid)
        command_lines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in jobs]
    finally:
        worker.kill()
        worker.wait(timeout=10)

    assert command_lines, "the job runs in a process of its own"
    for line in command_lines:
        assert PASSWORD.encode() not in line
    assert PASSWORD.encode() not in Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
