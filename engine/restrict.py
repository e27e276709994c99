"""Restrictions that make the host GPU stand in for a target. Each one restores the GPU on every exit path.

- SM share: a green context (in-process; work must run on the context's own stream) or an MPS daemon of our own
  with the workload in a child process under CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
- Core clock: an NVML lock to a supported clock, only where the operator allows it; reset on exit and at start-up.
  Otherwise the clock is emulated by the estimator (time x host clock / target clock).
- Memory: the process is capped at the target's memory so a workload that would not fit is reported as OOM.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from understudy.errors import RestrictionError
from understudy.results import Measurement
from engine.lifetime import ENV_PARENT_PID

log = logging.getLogger(__name__)


@contextmanager
def green_context(num_sms: int, device_index: int = 0) -> Iterator[Any]:
    """Yield a stream whose work runs on `num_sms` SMs. Streams not made by the context use every SM."""
    import torch

    try:
        from torch.cuda.green_contexts import GreenContext
    except ImportError as exc:
        raise RestrictionError(f"green contexts need torch >= 2.10 (this is {torch.__version__})") from exc
    try:
        if hasattr(GreenContext, "create"):
            ctx = GreenContext.create(num_sms=num_sms, device_id=device_index)
        else:
            ctx = GreenContext(num_sms=num_sms, device_id=device_index)
    except Exception as exc:
        raise RestrictionError(f"could not create a green context of {num_sms} SMs: {exc}") from exc
    pushed = False
    try:
        if hasattr(ctx, "Stream"):
            stream = ctx.Stream()
        else:
            ctx.set_context()
            pushed = True
            stream = torch.cuda.Stream()
        yield stream
    finally:
        torch.cuda.synchronize(device_index)
        if pushed:
            ctx.pop_context()
        del ctx


@contextmanager
def memory_cap(capacity_gb: float | None, device_index: int = 0) -> Iterator[None]:
    """Cap this process's CUDA allocations at the target's memory, then lift the cap."""
    import torch

    if capacity_gb is None:
        yield
        return
    total_gb = torch.cuda.get_device_properties(device_index).total_memory / 1e9
    torch.cuda.set_per_process_memory_fraction(min(1.0, capacity_gb / total_gb), device_index)
    try:
        yield
    finally:
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0, device_index)


def reset_clocks(nvml: Any, handle: Any) -> None:
    """Undo any clock lock (ours or one a crashed run left behind)."""
    nvml.nvmlDeviceResetGpuLockedClocks(handle)


@contextmanager
def clock_lock(nvml: Any, handle: Any, clock_mhz: float) -> Iterator[float]:
    """Lock the core clock at `clock_mhz` (a supported clock); always reset afterwards."""
    try:
        nvml.nvmlDeviceSetGpuLockedClocks(handle, int(clock_mhz), int(clock_mhz))
    except Exception as exc:
        reset_clocks(nvml, handle)
        raise RestrictionError(f"could not lock the core clock at {clock_mhz:.0f} MHz: {exc}") from exc
    try:
        yield clock_mhz
    finally:
        reset_clocks(nvml, handle)


# A worker names a folder of its GPU here for its jobs' MPS daemons, so that the next worker on that GPU can quit one
# that a killed job left running (worker.main.release_leftovers).
ENV_MPS_DIR = "UNDERSTUDY_MPS_DIR"


class MpsDaemon:
    """Our own MPS control daemon, with private pipe and log folders so it never meets anyone else's."""

    def __init__(self, control: str = "nvidia-cuda-mps-control", root: str | None = None) -> None:
        self.control = control
        parent = os.environ.get(ENV_MPS_DIR) or None
        if root is None and parent:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.root = Path(root or tempfile.mkdtemp(prefix="understudy-mps-", dir=parent))
        self.pipe_dir = self.root / "pipe"
        self.log_dir = self.root / "log"
        self.running = False

    @property
    def env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}

    def start(self) -> None:
        self.pipe_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if shutil.which(self.control) is None and not Path(self.control).exists():
            raise RestrictionError(f"MPS control program {self.control!r} not found")
        result = subprocess.run([self.control, "-d"], env={**os.environ, **self.env}, capture_output=True,
                                text=True, timeout=30)
        if result.returncode != 0:
            raise RestrictionError(f"MPS daemon did not start: {result.stderr.strip() or result.stdout.strip()}")
        self.running = True

    def stop(self) -> None:
        """Ask the daemon to quit. Safe to call twice and when it never started."""
        if not self.running:
            return
        try:
            subprocess.run([self.control], input="quit\n", env={**os.environ, **self.env}, capture_output=True,
                           text=True, timeout=30)
        finally:
            self.running = False

    def __enter__(self) -> MpsDaemon:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def quit_mps_daemons(folder: Path, control: str = "nvidia-cuda-mps-control") -> list[Path]:
    """Quit every daemon of ours whose folder lies in `folder` (one a killed process left running), and remove its
    folder. Returns the folders of the daemons asked to quit; one that cannot be asked is still removed. Its MPS
    children died with the process that started them (engine.mps_child), so nothing keeps it from quitting."""
    quit = []
    for root in sorted(folder.glob("understudy-mps-*")) if folder.is_dir() else []:
        daemon = MpsDaemon(control, root=str(root))
        daemon.running = True  # it may be: `quit` is harmless when it is not
        try:
            daemon.stop()
            quit.append(root)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("could not quit the MPS daemon in %s: %s", root, exc)
        shutil.rmtree(root, ignore_errors=True)
    return quit


def run_mps_child(
    daemon: MpsDaemon, percentage: int, request: dict[str, Any], timeout_s: float, gpu_index: int = 0
) -> Measurement:
    """Time the workload in a child process that is an MPS client limited to `percentage` of the SMs.

    The child is killed (with its process group) if it outlives the timeout; the daemon is the caller's to stop.
    """
    env = {
        **os.environ,
        **daemon.env,
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(percentage),
        "CUDA_VISIBLE_DEVICES": str(gpu_index),
        ENV_PARENT_PID: str(os.getpid()),
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "engine.mps_child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return Measurement(status="failed", error=f"MPS child exceeded its {timeout_s:.0f} s limit")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        tail = (err or out).strip().splitlines()[-3:]
        return Measurement(status="failed", error=f"MPS child exited {child.returncode}: {' | '.join(tail)}")
    return Measurement.model_validate_json(lines[-1])
