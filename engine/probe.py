"""The host probe: what GPU this is (through NVML) and what software runs on it, with a stable fingerprint.

Probing needs torch (the SM count, CUDA and cuDNN versions), and importing torch costs seconds; `remembered_host`
keeps the last probe in a file, valid while what it was made of is unchanged, so that a cached answer needs none.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

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


def nvml_view(gpu_index: int, nvml: Any | None) -> HostInfo:
    """What NVML alone says of GPU `gpu_index`, without torch: its name, or why there is none. Enough to tell which
    estimators can run here, not to key a measurement (no SM count, software or fingerprint: probe_host has them)."""
    if nvml is None:
        return HostInfo(note="no NVIDIA GPU found (NVML unavailable): only the analytic estimator can run")
    count = nvml.nvmlDeviceGetCount()
    if gpu_index >= count:
        return HostInfo(gpu_count=count, note=f"GPU {gpu_index} does not exist ({count} found)")
    name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(gpu_index))
    return HostInfo(gpu_name=name.decode() if isinstance(name, bytes) else name, gpu_count=count)


def probe_host(gpu_index: int = 0, nvml: Any | None = None) -> HostInfo:
    """Describe GPU `gpu_index` and the software stack. Without an NVIDIA GPU it says so instead of failing, and
    imports no torch: CUDA plays no part there, and the packages' metadata name the rest."""
    nvml = nvml or load_nvml()
    seen = nvml_view(gpu_index, nvml)
    if nvml is None or not seen.has_gpu:
        software: dict[str, str | None] = {"torch": _version("torch"), "cuda": None, "cudnn": None,
                                           "timm": _version("timm")}
        return seen.model_copy(update={**software, "fingerprint": "cpu-" + sha256_of(software)[:16]})
    software = _software()
    handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index)
    name, count = seen.gpu_name, seen.gpu_count
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


# What the fingerprint's software part comes from, read from the installed packages' metadata without importing them.
SOFTWARE_PACKAGES = ("torch", "torchvision", "timm", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12")


def probe_key(gpu_index: int, nvml: Any | None) -> dict[str, Any]:
    """What a probe's answer depends on, read cheaply (NVML and package metadata, no torch): the GPU (its UUID),
    the driver, the interpreter and the versions of torch, its CUDA build, cuDNN and timm. A remembered probe whose
    key differs is probed again."""
    gpu = driver = None
    if nvml is not None:
        try:
            if gpu_index < nvml.nvmlDeviceGetCount():
                raw = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(gpu_index))
                gpu = raw.decode() if isinstance(raw, bytes) else str(raw)
            raw = nvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:  # noqa: BLE001 - pynvml's NVMLError: the probe itself will say what is wrong
            gpu = driver = None
    spec = importlib.util.find_spec("torch")
    torch_version = None
    if spec is not None and spec.submodule_search_locations:
        # torch/version.py names the CUDA build too (2.14.1 exists as a CPU and as several CUDA builds).
        version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
        torch_version = version_file.read_text() if version_file.is_file() else None
    return {"gpu_index": gpu_index, "gpu": gpu, "driver": driver, "python": sys.version,
            "torch_build": torch_version, "packages": {name: _version(name) for name in SOFTWARE_PACKAGES}}


def remembered_host(path: Path, gpu_index: int, nvml: Any | None) -> HostInfo | None:
    """The host as last probed, if `path` holds a probe made under the same probe_key; else None."""
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") != probe_key(gpu_index, nvml):
            return None
        return HostInfo.model_validate(saved["host"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None


def remember_host(path: Path, gpu_index: int, nvml: Any | None, host: HostInfo) -> None:
    """Keep a probe for remembered_host (best effort: a cache that cannot be written is only slower next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"key": probe_key(gpu_index, nvml), "host": host.model_dump(mode="json")}))
        temporary.replace(path)
    except OSError:
        pass


# The oldest driver each CUDA major version's builds need (NVIDIA's CUDA release notes; minor-version compatibility
# lets any 12.x build run from 525.60.13 on). docker/worker.Dockerfile documents the builds it makes.
MIN_DRIVER_FOR_CUDA = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def cuda_mismatch(driver: str, driver_cuda: int | None, torch_version: str, torch_cuda: str | None) -> str:
    """Why torch cannot use a GPU that NVML sees, in words that say what to do. `driver_cuda` is NVML's
    nvmlSystemGetCudaDriverVersion_v2 (12040 for CUDA 12.4)."""
    supports = f"CUDA up to {driver_cuda // 1000}.{driver_cuda % 1000 // 10}" if driver_cuda else "an unknown CUDA"
    if torch_cuda is None:
        return (f"torch {torch_version} is a CPU build: the worker cannot measure on this GPU. Install a CUDA build "
                f"of torch for driver {driver} ({supports}), or use the worker image (docker/worker.Dockerfile)")
    major = int(torch_cuda.split(".")[0])
    needed = MIN_DRIVER_FOR_CUDA.get(major, "a newer one")
    return (f"torch {torch_version} is built for CUDA {torch_cuda}, which needs NVIDIA driver >= {needed}, and this "
            f"machine's driver {driver} supports {supports}: update the driver, or install the torch build for "
            f"{supports} (the worker image: docker build --build-arg TORCH_CUDA=cu1xx, see docker/worker.Dockerfile)")


def cuda_problem(gpu_index: int, nvml: Any | None) -> str | None:
    """Why torch cannot use GPU `gpu_index` although NVML sees it (a driver older than torch's CUDA build, a CPU
    build of torch), or None. Without this a worker on such a machine would quietly serve only `analytic`."""
    if nvml is None:
        return None
    try:
        if gpu_index >= nvml.nvmlDeviceGetCount():
            return None
        raw = nvml.nvmlSystemGetDriverVersion()
        driver = raw.decode() if isinstance(raw, bytes) else str(raw)
        driver_cuda = int(nvml.nvmlSystemGetCudaDriverVersion_v2())
    except Exception:  # noqa: BLE001 - pynvml's NVMLError: the probe reports the GPU as it can
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return cuda_mismatch(driver, driver_cuda, torch.__version__, torch.version.cuda)

