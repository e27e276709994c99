"""The host probe: what GPU this is (through NVML) and what software runs on it, with a stable fingerprint."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from understudy.results import HostInfo
from understudy.workload import sha256_of


def load_nvml() -> Any | None:
    """pynvml, initialised; None where there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - any failure here means "no usable NVIDIA GPU"
        return None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _software() -> dict[str, str | None]:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": str(cudnn) if cudnn else None,
            "timm": _version("timm")}


def probe_host(gpu_index: int = 0, nvml: Any | None = None) -> HostInfo:
    """Describe GPU `gpu_index` and the software stack. Without an NVIDIA GPU it says so instead of failing."""
    software = _software()
    nvml = nvml or load_nvml()
    if nvml is None:
        info = HostInfo(note="no NVIDIA GPU found (NVML unavailable): only the analytic estimator can run", **software)
        return info.model_copy(update={"fingerprint": "cpu-" + sha256_of(software)[:16]})
    count = nvml.nvmlDeviceGetCount()
    if gpu_index >= count:
        info = HostInfo(gpu_count=count, note=f"GPU {gpu_index} does not exist ({count} found)", **software)
        return info.model_copy(update={"fingerprint": "cpu-" + sha256_of(software)[:16]})
    handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index)
    name = nvml.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else name
    driver = nvml.nvmlSystemGetDriverVersion()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    memory_gb = nvml.nvmlDeviceGetMemoryInfo(handle).total / 1e9
    max_clock = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
    current = float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    supported: set[float] = set()
    try:
        for mem_clock in nvml.nvmlDeviceGetSupportedMemoryClocks(handle):
            supported.update(float(c) for c in nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, mem_clock))
    except Exception:  # noqa: BLE001 - some boards do not list clocks; the lock path then stays unused
        supported = set()
    sm_count = _sm_count(gpu_index)
    identity = {"gpu": name, "sms": sm_count, "memory_gb": round(memory_gb), "cc": f"{major}.{minor}",
                "driver": driver, **software}
    return HostInfo(
        gpu_name=name,
        gpu_count=count,
        sm_count=sm_count,
        max_sm_clock_mhz=max_clock,
        current_sm_clock_mhz=current,
        supported_clocks_mhz=sorted(supported),
        memory_gb=round(memory_gb, 2),
        driver=driver,
        compute_capability=f"{major}.{minor}",
        fingerprint=sha256_of(identity)[:16],
        **software,
    )


def _sm_count(gpu_index: int) -> int | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(gpu_index).multi_processor_count)
