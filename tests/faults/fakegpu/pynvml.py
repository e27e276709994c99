"""A stand-in for pynvml in the processes of a worker started by tests/faults (this folder goes first on PYTHONPATH).

It is tests/fakes.FakeNvml, one H200, with the GPU's state kept in a JSON file (FAKE_NVML_STATE) instead of in
memory: a clock lock taken by one process (a job) outlives it and is seen, and reset, by the next (a new worker), as
on a real GPU. Every lock and reset is appended to the file's "events" with the pid of the process that made it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.fakes import FakeNvml

STATE = Path(os.environ["FAKE_NVML_STATE"])
GPU_UUID = "GPU-00000000-fake-h200"


def _load() -> dict[str, Any]:
    return json.loads(STATE.read_text()) if STATE.exists() else {"locked_mhz": None, "events": []}


def _save(event: dict[str, Any], locked_mhz: int | None) -> None:
    state = _load()
    state["locked_mhz"] = locked_mhz
    state["events"].append({**event, "pid": os.getpid()})
    scratch = STATE.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps(state))
    scratch.replace(STATE)


class PersistentNvml(FakeNvml):
    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:  # noqa: N802 - pynvml's names
        self.locked_mhz = _load()["locked_mhz"]
        return super().nvmlDeviceGetClockInfo(handle, clock_type)

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, min_mhz: int, max_mhz: int) -> None:  # noqa: N802
        super().nvmlDeviceSetGpuLockedClocks(handle, min_mhz, max_mhz)
        _save({"event": "lock", "mhz": min_mhz}, self.locked_mhz)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:  # noqa: N802
        super().nvmlDeviceResetGpuLockedClocks(handle)
        _save({"event": "reset"}, None)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:  # noqa: N802
        self._check(handle)
        return GPU_UUID


_nvml = PersistentNvml()


class NVMLError(Exception):
    pass


def __getattr__(name: str) -> Any:
    return getattr(_nvml, name)
