"""What a worker checks before it serves: torch able to use the GPU NVML sees (else it would quietly serve only
`analytic`), and the MPS control program where MPS is asked for."""

from __future__ import annotations

import pytest
from tests.fakes import FakeNvml, h200_host, make_settings

from understudy.results import HostInfo
from worker.main import Probe, WorkerError, check_start
from engine.probe import cuda_mismatch, cuda_problem


def test_a_driver_older_than_torchs_cuda_build_is_named_with_what_to_do() -> None:
    message = cuda_mismatch("550.54.15", 12040, "2.14.1", "13.0")
    assert "built for CUDA 13.0, which needs NVIDIA driver >= 580.65.06" in message
    assert "driver 550.54.15 supports CUDA up to 12.4" in message
    assert "--build-arg TORCH_CUDA" in message


def test_a_cpu_build_of_torch_on_a_gpu_machine_is_named() -> None:
    assert "torch 2.14.1+cpu is a CPU build" in cuda_mismatch("580.00", 13000, "2.14.1+cpu", None)


def test_no_problem_without_a_gpu_to_use() -> None:
    assert cuda_problem(0, None) is None
    assert cuda_problem(3, FakeNvml()) is None  # NVML sees one GPU; the worker asked for the fourth


def test_a_worker_whose_torch_cannot_use_its_gpu_refuses_to_start() -> None:
    probed = Probe(h200_host(), {}, "GPU-1", cuda_problem=cuda_mismatch("550.54.15", 12040, "2.14.1", "13.0"))
    with pytest.raises(WorkerError, match="GPU 0 is there but torch cannot use it: torch 2.14.1 is built for CUDA"):
        check_start(make_settings(), 0, probed)


def test_mps_without_its_control_program_refuses_to_start() -> None:
    settings = make_settings(sm_mechanism="mps", mps_control="no-such-mps-control")
    with pytest.raises(WorkerError, match="needs no-such-mps-control, which is not on PATH"):
        check_start(settings, 0, Probe(h200_host(), {}, "GPU-1"))


def test_a_worker_without_a_gpu_starts_whatever_the_mechanism() -> None:
    settings = make_settings(sm_mechanism="mps", mps_control="no-such-mps-control")
    check_start(settings, 0, Probe(HostInfo(note="no GPU"), {}, None))
