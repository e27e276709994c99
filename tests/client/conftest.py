"""The client tests talk to a live service (tests/live_service.py): real HTTP, Postgres, Redis and a worker process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.live_service import LiveService, live_service
from tests.live_service import live  # noqa: F401 - the shared fixture, for this package's tests


@pytest.fixture(scope="package")
def service() -> Iterator[LiveService]:
    with live_service("client") as running:
        running.start_worker()
        yield running
