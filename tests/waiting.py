"""What the tests wait on and watch: a condition coming true, a process's children, whether a process still lives."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def wait_for(condition: Any, timeout_s: float, what: str, interval_s: float = 0.05,
             tolerate: tuple[type[BaseException], ...] = ()) -> Any:
    """condition()'s first truthy value, polled every interval_s; AssertionError naming `what` after timeout_s. A
    condition that raises one of `tolerate` is not true yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except tolerate:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


def _stat_fields(pid: int | str) -> list[str]:
    # The fields after the command name, which may itself hold spaces and parentheses.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children_of(pid: int) -> list[int]:
    """The pids whose parent is pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(_stat_fields(entry.name)[1])
            except (OSError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether pid runs: a zombie (Z) or dead (X) process has ended, only its parent's reaping is left."""
    try:
        return _stat_fields(pid)[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False
