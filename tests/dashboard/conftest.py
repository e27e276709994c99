"""Fixtures for the dashboard's browser tests: a live service (tests/live_service.py) and Debian's Chromium driven by
Playwright. Skipped, with the reason, where /usr/bin/chromium or the playwright package is missing (.ci/run installs
Chromium; `playwright install` is never run: its browser downloads are not reachable here).

Screenshots go to $UNDERSTUDY_TEST_ARTIFACTS/dashboard (default: <tmp>/understudy-test-artifacts/dashboard).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.live_service import LiveService, live_service
from tests.live_service import live  # noqa: F401 - the shared fixture, for this package's tests

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(os.environ.get("UNDERSTUDY_TEST_ARTIFACTS",
                                Path(tempfile.gettempdir()) / "understudy-test-artifacts")) / "dashboard"


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (Debian's package) to run the browser "
                    "tests; .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                                                 "(pip install -e '.[test]')")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="package")
def service(chromium: Any) -> Iterator[LiveService]:
    with live_service("dashboard") as running:
        yield running


@pytest.fixture
def page(chromium: Any, live: LiveService) -> Iterator[Any]:
    """A fresh browser tab; fails the test on any script error, console error or request outside the service
    (a CDN, say), which the page's Content-Security-Policy would also block."""
    context = chromium.new_context(viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    # Failed loads are judged by their responses below (Chromium also logs each one as a console error).
    tab.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
           if message.type == "error" and not message.text.startswith("Failed to load resource") else None)
    tab.on("request", lambda request: problems.append(f"request outside the service: {request.url}")
           if not request.url.startswith(live.url) else None)
    # A 422 or a 401 is what some tests provoke; any other error answer is a fault.
    tab.on("response", lambda response: problems.append(f"{response.status} from {response.url}")
           if response.status >= 400 and response.status not in (401, 422) else None)
    yield tab
    context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="package")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
