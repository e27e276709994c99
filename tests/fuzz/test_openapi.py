"""Property-based fuzzing of the OpenAPI schema (schemathesis): requests generated from every operation, valid and
deliberately invalid (negative mode: wrong types, out-of-range numbers, missing and extra fields), sent to the app
with a valid API key, against the real PostgreSQL and Redis. No answer may be a 5xx other than a 503 for a store that
is down (none is here), and no request may take long: at least 1,000 requests in all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.python import asgi

from app.main import app as the_app

EXAMPLES_PER_OPERATION = 150
MIN_REQUESTS = 1000
SLOW_S = 5.0

sent: list[tuple[str, int, float]] = []  # (operation, status, seconds), over the whole module


@pytest.fixture
def settings_without_rate_limits(app: Any, settings: Any) -> Iterator[None]:
    """Over a thousand writes in a minute from one client is the point here, not abuse."""
    from app.core.config import get_settings

    app.dependency_overrides[get_settings] = lambda: settings.model_copy(
        update={"rate_limit_per_key": 0, "rate_limit_per_ip": 0})
    yield


@pytest.fixture
def asgi_client(app: Any) -> Iterator[Any]:
    """One in-process client for every request of a test (the app started once)."""
    with asgi.get_client(app) as client:
        yield client


# Loaded at collection: building the schema needs the app object only, no database or Redis.
schema = schemathesis.openapi.from_asgi("/openapi.json", the_app)
# The key is ours (valid, so that requests get past authentication); the generated parts are everything else.
schema.config.generation.update(max_examples=EXAMPLES_PER_OPERATION, deterministic=True, database="none",
                                with_security_parameters=False)


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
@pytest.mark.timeout(150)
def test_no_generated_request_gets_a_server_error_or_hangs(case: Any, auth: dict[str, str], asgi_client: Any,
                                                           settings_without_rate_limits: None) -> None:
    started = time.monotonic()
    response = case.call(session=asgi_client, headers=dict(auth))
    took = time.monotonic() - started
    sent.append((f"{case.method} {case.path}", response.status_code, took))

    assert response.status_code < 500, (case.as_curl_command(), response.status_code, response.text[:500])
    assert took < SLOW_S, (case.as_curl_command(), f"{took:.1f} s")
    assert response.headers.get("content-type", [""])[0].startswith("application/json"), case.as_curl_command()


def test_the_fuzzing_sent_at_least_a_thousand_requests() -> None:
    by_status: dict[int, int] = {}
    for _, status, _ in sent:
        by_status[status] = by_status.get(status, 0) + 1
    assert len(sent) >= MIN_REQUESTS, (len(sent), by_status)
    assert max(took for _, _, took in sent) < SLOW_S
