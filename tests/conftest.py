"""The test tiers, assigned here by path so that every test has exactly one (pytest -m TIER runs one):

- unit: no server, no GPU, seconds: the domain, the engine on fakes, evaluation, the CLI in-process.
- service: the ledger, the API and the worker against the real PostgreSQL and Redis (TEST_DATABASE_URL,
  TEST_REDIS_URL), in-process or as worker subprocesses.
- e2e: a live API in a subprocess, driven over HTTP: the Python client, the dashboard in a browser, fuzzing.
- faults: stores and workers killed and restarted; on a PostgreSQL and a Redis of their own (tests/faults/stores.py).

A test goes by its own entry in TIERS, else its file's, else its folder's.
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

TIERS: dict[str, str] = {
    "bands": "unit",
    "engine": "unit",
    "engine/test_cli.py::test_installed_command_runs": "e2e",
    "engine/test_cli.py::test_a_cached_answer_imports_no_torch": "e2e",
    "deploy": "unit",
    "evaluation": "unit",
    "populations/test_math.py": "unit",
    "populations/test_migration.py": "service",
    "populations/test_api.py": "e2e",
    "populations/test_measurements.py": "e2e",
    "populations/test_rounds_api.py": "e2e",
    "rounds": "unit",
    "service": "service",
    "service/test_readme_service.py": "e2e",
    "abuse": "service",
    "security": "service",
    "security/test_body_limits.py": "e2e",
    "client": "e2e",
    "dashboard": "e2e",
    "fuzz": "e2e",
    "faults": "faults",
}


def tier_of(path: str, test: str) -> str:
    """A test's tier: its own entry in TIERS, else its file's, else its nearest folder's."""
    parts = path.split("/")
    for key in [f"{path}::{test}", path, *("/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1))]:
        if key in TIERS:
            return TIERS[key]
    raise pytest.UsageError(f"{path} has no tier: add its folder or file to TIERS in tests/conftest.py")


def tiers_within(path: str) -> set[str]:
    """Every tier a test under this file or folder can have."""
    own = {TIERS[key] for key in TIERS if key.startswith((f"{path}/", f"{path}::"))}
    try:
        return own | {tier_of(path, "")}
    except pytest.UsageError:
        return own


def selected_tier(config: pytest.Config) -> str | None:
    """The tier that `-m TIER` runs; None for a run of every tier or of another marker expression."""
    tier = (config.option.markexpr or "").strip()
    return tier if tier in TIERS.values() else None


def pytest_configure(config: pytest.Config) -> None:
    """The fuzz tests' pytest plugins, only in a run that can collect those tests. Importing schemathesis takes two
    seconds, so pyproject's addopts keeps its plugin from loading itself (-p no:schemathesis); hypothesis's plugin
    loads cheaply but imports hypothesis (a second) to write its summary, so it goes where no test can use it.
    Where schemathesis is not installed (the GPU host, which runs tests/engine/test_gpu.py), nothing is loaded."""
    tier = selected_tier(config)
    if tier is None or tier in tiers_within("fuzz"):
        # Not loaded by itself (it is, where addopts was overridden), and installed.
        if not config.pluginmanager.has_plugin("schemathesis") and importlib.util.find_spec("schemathesis"):
            config.pluginmanager.import_plugin("schemathesis.pytest.plugin")
    elif config.pluginmanager.has_plugin("hypothesispytest"):
        config.pluginmanager.unregister(name="hypothesispytest")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The heap is frozen at exit, once pytest is done (its own last collections included): the interpreter's final
    collections then skip it. With torch, timm and dynamo loaded they took about a second at the end of every run
    (of each xdist worker too), and freed nothing anyone would see."""
    atexit.register(gc.freeze)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With `-m TIER`, files and folders that hold no test of that tier are not even imported: collecting the
    browser and fuzzing tests alone takes longer than the whole unit tier."""
    tier = selected_tier(config)
    if tier is None:
        return None
    try:
        path = collection_path.resolve().relative_to(HERE).as_posix()
    except ValueError:
        return None
    if path in ("conftest.py", "__init__.py", ".") or not (collection_path.is_dir() or path.endswith(".py")):
        return None
    if collection_path.is_file() and not collection_path.name.startswith("test_"):
        return None
    return True if tier not in tiers_within(path) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve().relative_to(HERE).as_posix()
        test = getattr(item, "originalname", item.name)
        item.add_marker(getattr(pytest.mark, tier_of(path, test)))
