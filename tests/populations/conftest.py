"""The population API tests run against a live service (tests/live_service.py); the math tests need nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.live_service import LiveService, live_service
from tests.live_service import live  # noqa: F401 - the shared fixture, for this package's tests


@pytest.fixture(scope="package")
def service() -> Iterator[LiveService]:
    with live_service("populations") as running:
        running.start_worker()
        yield running
