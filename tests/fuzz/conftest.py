"""Fixtures for the fuzz tests: the service tests' real PostgreSQL and Redis, app and key (tests/service/conftest.py).
"""

from __future__ import annotations

from tests.service.conftest import api_key, app, auth, clean, client, db, redis, service_env, settings  # noqa: F401 - fixtures
