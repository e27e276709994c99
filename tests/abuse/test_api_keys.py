"""API keys are stored only as hashes and compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.security import PREFIX_CHARS, authenticate
from ledger.models import ApiKey


def test_the_store_holds_the_keys_sha256_and_nowhere_the_key_itself(db, api_key):
    with Session(db) as session:
        stored = session.scalars(select(ApiKey)).one()
        dump = session.execute(text("SELECT row_to_json(api_keys)::text FROM api_keys")).scalar_one()

    assert stored.key_hash == hashlib.sha256(api_key.encode()).hexdigest()
    assert api_key not in dump
    assert api_key[PREFIX_CHARS:] not in dump  # only the short, public prefix is kept


def test_a_key_is_compared_with_hmac_compare_digest(db, api_key, monkeypatch):
    compared: list[tuple[Any, Any]] = []
    constant_time = hmac.compare_digest

    def recording_compare(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr("app.security.hmac.compare_digest", recording_compare)
    forged = api_key[:PREFIX_CHARS] + "x" * (len(api_key) - PREFIX_CHARS)  # right prefix, wrong secret
    with Session(db) as session:
        good = authenticate(session=session, token=api_key)
        bad = authenticate(session=session, token=forged)

    assert good is not None and bad is None
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    assert compared[0] == (digest, digest)
    assert compared[1] == (digest, hashlib.sha256(forged.encode()).hexdigest())


def test_a_forged_key_with_a_real_prefix_is_401(client, api_key):
    forged = api_key[:PREFIX_CHARS] + "A" * (len(api_key) - PREFIX_CHARS)

    answer = client.post("/v1/predictions", json={"workload": {"model": "resnet18"}, "targets": ["t4"]},
                         headers={"X-API-Key": forged})

    assert answer.status_code == 401
