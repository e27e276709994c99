"""Fixtures for the evaluation tests: an EvalRow builder that spells out only the fields a test cares about."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evaluation.rows import EvalRow


def _make_row(
    target: str,
    measured_ms: float,
    predicted: dict[str, float | None],
    *,
    model: str = "resnet50",
    workload_key: str | None = None,
    resolution: int = 224,
    mode: str = "infer",
    outcome: dict[str, str] | None = None,
    note: str | None = None,
) -> EvalRow:
    return EvalRow(
        target=target,
        model=model,
        resolution=resolution,
        batch_size=32,
        mode=mode,
        precision="amp-fp16",
        workload_key=workload_key or f"{model}|{mode}|amp-fp16|32|{resolution}",
        measured_ms=measured_ms,
        predicted=predicted,
        outcome=outcome or {name: "done" if value is not None else "failed" for name, value in predicted.items()},
        note=note,
    )


@pytest.fixture(scope="session")
def make_row() -> Callable[..., EvalRow]:
    return _make_row
