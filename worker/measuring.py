"""The worker's warm measuring process: one child per worker that runs the predictions of every job, one at a time.

A job's own cost is small next to what a fresh process pays before it can measure anything: importing torch and
timm, probing the host, creating the CUDA context and the cuBLAS and cuDNN handles, and letting cuDNN choose its
algorithms for each convolution shape (which it then keeps for the rest of the process). The worker therefore starts
this process once, warms it up before the first job arrives, and hands it each job's row ids; the engine it holds
(worker.tasks.engine_for) lives as long as it does.

What a process per job gave is kept:
- the worker process itself never touches CUDA (it only forwards ids and waits);
- the child dies with the worker (engine.lifetime.die_with_parent), so a killed worker leaves nothing on its GPU
  that the next worker's start-up cannot release;
- a job over its time limit is stopped inside the child (its restrictions are released on the way out) and its rows
  fail with the limit named; a child that does not come back within a grace period after that is killed;
- a child that dies mid-job fails that job's rows with the reason, and a new child is started for the next job.

cuDNN's choices outlive a job here, and one chosen on the whole GPU can fail under fewer SMs (engine.engine's
measuring_order). A job that restricts SMs in this process (worker.tasks.restricts_sms) therefore runs in a fresh
child, which is replaced again after it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from rq.timeouts import JobTimeoutException

log = logging.getLogger("understudy.worker")

# What the child runs: the job functions of worker.tasks, served by this module. Its command line says only which end
# of the socket pair is its own and whose death kills it; nothing secret (the database and Redis URLs stay in the
# environment, readable only by the worker's user).
_BOOT = ("import sys; from worker.measuring import serve; from worker.tasks import CHILD_FUNCTIONS, warm_up; "
         "serve(int(sys.argv[1]), int(sys.argv[2]), CHILD_FUNCTIONS, warm_up)")

# A child that overran a job's limit gets this long to stop by itself (release its restrictions, fail its rows)
# before it is killed.
STOP_GRACE_S = 30.0
# How long the worker waits for a new child to import torch and probe its GPU before giving up on it.
START_TIMEOUT_S = 300.0


class MeasuringProcessDied(RuntimeError):
    """The measuring process ended (crashed, was killed, ran out of host memory) while it ran a job."""


class MeasuringProcess:
    """The worker's side: start the child, send it a job, wait for its answer within the job's limit."""

    def __init__(self, *, on_killed: Callable[[], None] | None = None) -> None:
        """`on_killed` runs after a child had to be killed mid-job: what it held on the GPU is released there."""
        self.on_killed = on_killed
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._ready = False
        self._used = False  # whether the current child has run a job

    # --- the child's life ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start a child, which warms itself up at once; returns without waiting for it."""
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(os.getpid())], pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._ready = self._used = False

    def _ensure_ready(self) -> Connection:
        """The connection to a warmed-up child, starting one if there is none (or the last one died)."""
        if self._process is None or self._process.poll() is not None:
            self.start()
        assert self._conn is not None and self._process is not None
        if not self._ready:
            if not self._conn.poll(START_TIMEOUT_S):
                self._kill()
                raise MeasuringProcessDied(f"the measuring process did not start within {START_TIMEOUT_S:g} s")
            self._receive()  # "ready": warmed up, or it logged why it could not
            self._ready = True
        return self._conn

    def _receive(self) -> tuple[str, Any]:
        assert self._conn is not None and self._process is not None
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            status = self._process.wait(timeout=10)
            self._forget()
            raise MeasuringProcessDied(_died(status)) from None
        return str(kind), payload

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        self._forget()

    def _forget(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn, self._ready = None, None, False

    def stop(self) -> None:
        """End the child: ask it to leave (it finishes nothing: the worker stops only between jobs), kill it if it
        does not."""
        if self._process is None:
            return
        try:
            if self._conn is not None:
                self._conn.send(("stop", None, 0))
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # --- one job ------------------------------------------------------------------------------------------------

    def run(self, function: str, args: list[Any], *, timeout_s: float, fresh: bool = False) -> Any:
        """Run worker.tasks' `function(*args)` in the child and return what it returned. The child stops it at
        `timeout_s` (JobTimeoutException here too); `fresh` runs it in a child that ran nothing before it and is
        replaced after it."""
        if fresh and self._used:
            self.stop()
            self.start()
        self._used = True
        try:
            answer = self._ask(function, args, timeout_s)
        except MeasuringProcessDied:
            self.start()  # the next job finds a warm process again
            raise
        if fresh:
            self.stop()
            self.start()
        kind, payload = answer
        if kind == "timeout":
            raise JobTimeoutException(str(payload))
        if kind == "error":
            raise RuntimeError(str(payload))
        return payload

    def _ask(self, function: str, args: list[Any], timeout_s: float) -> tuple[str, Any]:
        conn = self._ensure_ready()
        conn.send((function, args, timeout_s))
        if not conn.poll(timeout_s + STOP_GRACE_S):
            self._kill()
            if self.on_killed is not None:
                self.on_killed()
            raise MeasuringProcessDied(f"timed out after {timeout_s:g} s (the job time limit, "
                                       f"UNDERSTUDY_JOB_TIMEOUT_S); its process did not stop and was killed")
        return self._receive()


def _died(status: int) -> str:
    """Why a job has no answer, as its rows record it."""
    reason = f"the job's process died (exit status {status}"
    if status < 0:
        reason += f", signal {-status}"
    return reason + "); it may have run out of host memory or crashed in a driver"


# --- the child --------------------------------------------------------------------------------------------------


def serve(fd: int, parent_pid: int, functions: dict[str, Callable[..., Any]], warm_up: Callable[[], None]) -> None:
    """The child's loop: warm up, say so, then run each job the worker sends (a name in `functions` and its
    arguments) until told to stop, or the worker goes."""
    from engine.lifetime import die_with_parent

    die_with_parent(parent_pid)
    # A SIGTERM to the worker's process group must not kill a measurement mid-way: the worker stops between jobs
    # and then ends this process itself.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    started = time.perf_counter()
    try:
        warm_up()
        log.info("measuring process %d warm in %.1f s", os.getpid(), time.perf_counter() - started)
    except Exception:  # a job meets the same problem and records it on its rows, where users see it
        log.exception("measuring process %d could not warm up; its jobs will say why they fail", os.getpid())
    conn.send(("ready", None))
    while True:
        try:
            function, args, timeout_s = conn.recv()
        except (EOFError, OSError):
            return
        if function == "stop":
            return
        conn.send(_run_one(functions[function], args, timeout_s))


def _run_one(function: Callable[..., Any], args: list[Any], timeout_s: float) -> tuple[str, Any]:
    from rq.timeouts import UnixSignalDeathPenalty

    try:
        with UnixSignalDeathPenalty(max(1, int(round(timeout_s))), JobTimeoutException):
            return "ok", function(*args)
    except JobTimeoutException as exc:
        return "timeout", str(exc)
    except Exception as exc:  # noqa: BLE001 - the job's rows already hold their failure; the worker logs this
        return "error", "".join(traceback.format_exception_only(exc)).strip() + "\n" + traceback.format_exc()
