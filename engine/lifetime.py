"""Tying a child process's life to its parent's, so a worker killed mid-job leaves nothing running on its GPU.

A job process of `understudy worker` dies with the worker, and an MPS child dies with the process that started it;
so a SIGKILLed worker takes its whole tree down and the next worker can quit the MPS daemon it left, which MPS
refuses while clients still run.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
# Set by engine.restrict.run_mps_child: the pid an MPS child dies with.
ENV_PARENT_PID = "UNDERSTUDY_MPS_PARENT_PID"


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent exits; exit now if `parent_pid` has already gone.
    Does nothing off Linux."""
    if parent_pid == os.getpid():
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the tie was made
