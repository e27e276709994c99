"""A child tied to its parent dies when the parent is SIGKILLed: how a killed worker leaves no MPS client behind."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import alive, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

CHILD = """
import os, sys, time
from engine.lifetime import die_with_parent
die_with_parent(int(sys.argv[1]))
print(os.getpid(), flush=True)
time.sleep(60)
"""

# The parent starts the tied child in a session of its own (as run_mps_child does), reports its pid, and waits.
PARENT = f"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}, str(os.getpid())], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
print(child.stdout.readline().strip(), flush=True)
time.sleep(60)
"""


def test_a_tied_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert alive(child_pid)

    parent.send_signal(signal.SIGKILL)
    parent.wait()

    wait_for(lambda: not alive(child_pid), 10, "the tied child to die with its parent")


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    # Tied to a pid that is not its parent: the parent it was meant for has died before the tie was made.
    result = subprocess.run([sys.executable, "-c", CHILD, "1"], capture_output=True, text=True, timeout=30,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 1
    assert result.stdout == ""
