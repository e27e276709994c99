"""Fixtures for the security tests: the service tests' real PostgreSQL and Redis, app, client and key
(tests/service/conftest.py), plus two owners' keys and an admin key, and the service's settings as shipped (reads need
a key) with any of them changed for one test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.service.conftest import api_key, app, auth, clean, client, db, redis, service_env, settings  # noqa: F401
from sqlalchemy import Engine
from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Keys:
    a: dict[str, str]
    b: dict[str, str]
    admin: dict[str, str]
    a_id: str
    b_id: str


@pytest.fixture
def keys(db: Engine) -> Keys:
    """Two owners, A and B, and an admin: each as the headers that send its key."""
    from app.security import create_api_key

    with Session(db) as session:
        key_a, token_a = create_api_key(session=session, name="owner-a")
        key_b, token_b = create_api_key(session=session, name="owner-b")
        _, token_admin = create_api_key(session=session, name="admin", admin=True)
        return Keys({"X-API-Key": token_a}, {"X-API-Key": token_b}, {"X-API-Key": token_admin}, key_a.id, key_b.id)


@pytest.fixture
def configure(app: Any, settings: Any) -> Iterator[Callable[..., Any]]:
    """Serve with the shipped defaults for reads (a key needed), changed by keyword (Settings field names)."""
    from understudy.settings import get_settings

    def apply(**changes: Any) -> Any:
        changed = settings.model_copy(update={"read_requires_key": True, **changes})
        app.dependency_overrides[get_settings] = lambda: changed
        return changed

    apply()
    yield apply
    app.dependency_overrides.pop(get_settings, None)
