"""Recording an evaluation's workloads in a child process, one at a time, so that one running past its time limit
can be killed without losing the run (`understudy evaluate --measure-only --workload-timeout-s`).

The parent (RecordingChild, used by evaluation.evaluate.record) sends each workload's ground-truth rows as a JSON line;
the child measures them into the measurement log as evaluation.evaluate.record_plan does in-process, and answers one
line {"logged": true|false}. A workload past its limit (or one that takes the child down) is killed with the child
and logged as failed, so a replay lists it and a later run does not measure it again; the next workload gets a
fresh child.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from understudy.results import Measurement
from engine.engine import Engine, distinct_settings
from evaluation.evaluate import Plan, gpu_settings, known_targets, record_plan
from engine.measurement_log import MeasurementLog

REPLY = '{"logged"'


def serve(engine: Engine, estimators: list[str], requests: IO[str], replies: IO[str]) -> None:
    """The child's loop: one workload per request line, one reply line each, until the input ends."""
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        logged = record_plan(engine, Plan(key=request["key"], rows=request["rows"]), estimators)
        replies.write(json.dumps({"logged": logged}) + "\n")
        replies.flush()


def main() -> None:
    from understudy.settings import get_settings
    from engine.lifetime import die_with_parent

    config = json.loads(sys.argv[1])
    die_with_parent(int(config["parent"]))
    engine = Engine(get_settings(), gpu_index=int(config["gpu"]), log=MeasurementLog(Path(config["log"])))
    serve(engine, list(config["estimators"]), sys.stdin, sys.stdout)


class RecordingChild:
    """The parent's side: starts the child when there is work, and replaces it after a workload that timed out."""

    def __init__(self, engine: Engine, estimators: list[str]) -> None:
        if engine.log is None:
            raise ValueError("recording in a child needs a measurement log to share with it")
        self.engine = engine
        self.log_path = engine.log.path
        self.estimators = estimators
        self._process: subprocess.Popen[str] | None = None
        self._buffer = ""

    def record(self, plan: Plan, timeout_s: float) -> bool:
        """Whether the child logged something of the workload within `timeout_s`. A workload past its limit, or
        one that took the child down, is logged as failed (under the GPU settings it would have been measured at)."""
        process = self._process or self._start()
        assert process.stdin is not None
        reply, ended = None, False
        try:
            process.stdin.write(json.dumps({"key": plan.key, "rows": plan.rows}) + "\n")
            process.stdin.flush()
            reply = self._reply(time.monotonic() + timeout_s)
        except (BrokenPipeError, EOFError):
            ended = True
        if reply is not None:
            return bool(reply.get("logged"))
        died = _exit_status(process, ended)
        self._stop()
        if died is None:
            self._log_failure(plan, f"measuring exceeded its {timeout_s:.0f} s limit")
        else:
            self._log_failure(plan, f"the recording process died measuring it (exit status {died})")
        return False

    def close(self) -> None:
        if self._process is None:
            return
        assert self._process.stdin is not None
        try:
            self._process.stdin.close()
            self._process.wait(timeout=30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            pass
        self._stop()

    def _start(self) -> subprocess.Popen[str]:
        config = {"log": str(self.log_path), "gpu": self.engine.gpu_index, "estimators": self.estimators,
                  "parent": os.getpid()}
        self._buffer = ""
        self._process = subprocess.Popen([sys.executable, "-m", "evaluation.record_child", json.dumps(config)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         start_new_session=True)
        return self._process

    def _reply(self, deadline: float) -> dict[str, Any] | None:
        """The child's next reply line; None past the deadline. EOFError once the child has closed its output (it is
        exiting). Other lines a library prints are skipped."""
        assert self._process is not None and self._process.stdout is not None
        stream = self._process.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            while True:
                while "\n" in self._buffer:
                    line, self._buffer = self._buffer.split("\n", 1)
                    if line.startswith(REPLY):
                        return dict(json.loads(line))
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    return None
                chunk = os.read(stream.fileno(), 65536).decode(errors="replace")
                if not chunk:
                    raise EOFError("the recording process closed its output")
                self._buffer += chunk

    def _stop(self) -> None:
        """Kill the child with everything it started, whatever it is doing; the next workload starts a new one."""
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._process.wait()
        self._process = None

    def _log_failure(self, plan: Plan, reason: str) -> None:
        from pydantic import ValidationError

        from understudy.errors import UnderstudyError
        from understudy.workload import workload_from_row

        try:
            workload = workload_from_row(plan.rows[0])
        except (ValidationError, UnderstudyError):
            return
        failed = Measurement(status="failed", error=reason)
        # Read again: the child has written to the log since this process loaded it.
        log = MeasurementLog(self.log_path)
        plans = gpu_settings(self.engine, workload, list(known_targets(plan).values()), self.estimators)
        for setting, _ in distinct_settings(plans):
            if log.get(self.engine.host, workload, setting) is None:
                log.put(self.engine.host, workload, setting, failed)


def _exit_status(process: subprocess.Popen[str], ended: bool) -> int | None:
    """The child's exit status if it has `ended` (closed its pipes) or exited, None if it is still at work. A child
    whose pipes have closed may not have been reaped yet: wait for it rather than mistake it for one that ran out of
    time."""
    if not ended:
        return process.poll()
    try:
        return process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


if __name__ == "__main__":
    main()
