"""The README's "On one machine" section, run as written on a fresh PostgreSQL role and database: create them, migrate,
make a key, start the API and a worker, then the curl commands that follow it, until the prediction is done.

What the test changes, and only that: the role and database are named afresh (and dropped afterwards), `.venv/bin/`
is this interpreter's folder, Redis is the test database, and the API listens on a free port. The commands run through
bash, one README line (or one curl command) at a time, so a README step that stops working fails here with its
output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .helpers import TEST_REDIS_URL

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### On one machine"


def bash_blocks(section: str) -> list[str]:
    """The ```bash blocks of a README section, in order."""
    text = README.read_text()
    start = text.index(section)
    end = text.find("\n### ", start + len(section))
    return re.findall(r"```bash\n(.*?)```", text[start:end if end > 0 else None], flags=re.S)


def curl_commands(block: str) -> list[str]:
    """The block's commands: each starts with `curl` and runs until the next (comment lines are bash's to skip)."""
    commands: list[str] = []
    for line in block.splitlines():
        if line.startswith("curl"):
            commands.append(line)
        elif commands:
            commands[-1] += "\n" + line
    return commands


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ReadmeRun:
    """The README's set-up lines with this test's substitutions, and the environment its exports build up."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("UNDERSTUDY_")}
        self.env.update({"UNDERSTUDY_API_PORT": str(port), "UNDERSTUDY_HOST_NAME": "readme-test"})
        self.processes: list[subprocess.Popen[str]] = []

    def substitute(self, line: str) -> str:
        if line.startswith(("psql", "createdb", "export DATABASE_URL")):
            line = re.sub(r"\bunderstudy\b", self.name, line)
        line = line.replace("redis://127.0.0.1:6379/0", TEST_REDIS_URL)
        line = line.replace("localhost:8000", f"localhost:{self.port}")
        return line.replace(".venv/bin/", f"{Path(sys.executable).parent}/")

    def run(self, line: str) -> str:
        done = subprocess.run(["bash", "-c", line], env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"README step failed: {line}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def start(self, line: str) -> None:
        self.processes.append(subprocess.Popen(["bash", "-c", f"exec {line}"], env=self.env, text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT))

    def stop(self) -> list[str]:
        outputs = []
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                output, _ = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate(timeout=10)
            outputs.append(output or "")
        return outputs


@pytest.fixture
def readme_run(redis: object) -> Iterator[ReadmeRun]:
    for tool in ("psql", "createdb", "bash", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the README's service section needs it")
    run = ReadmeRun(f"us_readme_{uuid.uuid4().hex[:8]}", free_port())
    yield run
    run.stop()
    # Only what this test made: its own database and role.
    subprocess.run(["psql", "-d", "postgres", "-qc", f"DROP DATABASE IF EXISTS {run.name} WITH (FORCE)"],
                   capture_output=True, timeout=60, check=False)
    subprocess.run(["psql", "-d", "postgres", "-qc", f"DROP ROLE IF EXISTS {run.name}"], capture_output=True,
                   timeout=60, check=False)


def wait_ready(port: int, processes: list[subprocess.Popen[str]], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in processes), "the API or the worker stopped early"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError("the API never became ready")


def wait_worker(port: int, key: str, processes: list[subprocess.Popen[str]], timeout_s: float = 120.0) -> None:
    """Until the worker has registered: the API refuses work that no live worker would take (503)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in processes), "the API or the worker stopped early"
        answer = httpx.get(f"http://127.0.0.1:{port}/v1/hosts", headers={"X-API-Key": key}, timeout=5)
        if answer.status_code == 200 and answer.json()["data"]:
            return
        time.sleep(0.5)
    raise AssertionError("the worker never registered")


def test_the_readme_service_section_runs_as_written_on_a_fresh_database(readme_run: ReadmeRun) -> None:
    setup, requests = bash_blocks(SECTION)[:2]
    key = ""
    for raw in setup.splitlines():
        line = readme_run.substitute(raw.strip())
        command = re.sub(r"\s+#.*$", "", line)  # without its comment
        if not command or command.startswith("#"):
            continue
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            readme_run.env[name] = value
        elif command.endswith((" serve", " worker --gpu 0")):  # the two that run until stopped
            readme_run.start(command)
        else:
            output = readme_run.run(line)
            if "keys create" in line:
                key = output.strip().splitlines()[-1]
    assert key.startswith("us_"), "keys create printed no key"
    readme_run.env["KEY"] = key
    readme_run.env["H"] = f"X-API-Key: {key}"  # the README's shorthand for the reads' header
    wait_ready(readme_run.port, readme_run.processes)
    wait_worker(readme_run.port, key, readme_run.processes)

    post, *reads = curl_commands(requests)
    created = json.loads(readme_run.run(readme_run.substitute(post)))
    assert "data" in created, created
    ids = [item["id"] for item in created["data"]]
    # No GPU worker registered here, so the API picks analytic.
    assert len(ids) == 3 and {item["estimator"] for item in created["data"]} == {"analytic"}

    deadline = time.monotonic() + 240
    while True:
        states = [json.loads(readme_run.run(readme_run.substitute(
            f'curl -s -H "X-API-Key: $KEY" localhost:8000/v1/predictions/{i}'))) for i in ids]
        if all(state["status"] in ("done", "oom", "failed") for state in states) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [state["status"] for state in states] == ["done"] * 3, states
    for command in reads:
        answer = readme_run.run(readme_run.substitute(command.replace("<id>", ids[0])))
        json.loads(answer)  # every documented read answers JSON
