"""Fixtures for the engine tests: a machine without a GPU, a fake NVML, recorded restrictions."""

from __future__ import annotations

import pytest
from tests.fakes import FakeNvml, RestrictionRecorder


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML cannot be loaded: the engine and the probe see a machine without an NVIDIA GPU (also on the H200)."""
    monkeypatch.setattr("engine.probe.load_nvml", lambda: None)
    monkeypatch.setattr("engine.engine.load_nvml", lambda: None)


@pytest.fixture
def nvml() -> FakeNvml:
    return FakeNvml()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> RestrictionRecorder:
    """Green contexts and memory caps (CUDA-only) replaced by recorders, as the bench sees them."""
    fake = RestrictionRecorder()
    monkeypatch.setattr("engine.restrict.green_context", fake.green_context)
    monkeypatch.setattr("engine.restrict.memory_cap", fake.memory_cap)
    return fake
