"""The population API tests run against a live service (tests/live_service.py); the math tests need nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_service import LiveService, live_service


@pytest.fixture(scope="package")
def service() -> Iterator[LiveService]:
    with live_service("populations") as running:
        running.start_worker()
        yield running


@pytest.fixture
def live(service: LiveService) -> Iterator[LiveService]:
    """Empty tables and queues, a worker running (pause_workers() holds it)."""
    service.ensure_worker()
    service.clean()
    yield service
    service.resume_workers()
