"""The MPS client process: reads a timing request on stdin, times it, prints the Measurement as one JSON line.

Run by engine.restrict.run_mps_child with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set; the percentage is fixed for a
process's life, so each SM share gets its own child. It dies with the process that started it: an orphan would
keep its MPS daemon from quitting.
"""

from __future__ import annotations

import json
import os
import sys

from understudy.results import Measurement
from understudy.workload import Workload
from engine.lifetime import ENV_PARENT_PID, die_with_parent


def main() -> None:
    if parent := os.environ.get(ENV_PARENT_PID):
        die_with_parent(int(parent))
    request = json.loads(sys.stdin.read())
    from engine.restrict import memory_cap
    from engine.timing import measure

    try:
        with memory_cap(request.get("memory_cap_gb")):
            result = measure(
                Workload.model_validate(request["workload"]),
                device_index=0,
                windows=request.get("windows", 10),
                window_ms=request.get("window_ms", 50.0),
                profile=request.get("profile", False),
                cudnn_benchmark=request.get("cudnn_benchmark", True),
            )
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a failed measurement
        result = Measurement(status="failed", error=f"{type(exc).__name__}: {exc}")
    sys.stdout.write(result.model_dump_json() + "\n")


if __name__ == "__main__":
    main()
