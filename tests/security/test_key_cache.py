"""The API key gate remembers a key's lookup for app.auth.CACHE_S, so that a cache hit polled again and again costs no
database round trip (benchmarks/load/REPORT.md). Revocation still takes effect: at once in the process that revoked
the key through the API, within CACHE_S everywhere else (another uvicorn worker, `understudy keys revoke`)."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from app import auth
from app.security import Caller, revoke_api_key


def test_a_key_revoked_through_the_api_stops_working_at_once(client, keys, configure):
    assert client.get("/v1/predictions", headers=keys.a).status_code == 200  # its lookup is remembered now

    assert client.delete(f"/v1/keys/{keys.a_id}", headers=keys.admin).status_code == 200

    assert client.get("/v1/predictions", headers=keys.a).status_code == 401
    assert client.get("/v1/predictions", headers=keys.b).status_code == 200


def test_a_key_revoked_elsewhere_stops_working_within_the_cache_time(client, db, keys, configure, monkeypatch):
    monkeypatch.setattr(auth, "CACHE_S", 0.5)
    assert client.get("/v1/predictions", headers=keys.a).status_code == 200
    with Session(db) as session:  # what `understudy keys revoke` does, from another process
        revoke_api_key(session=session, key_id_or_prefix=keys.a_id)

    time.sleep(0.6)

    assert client.get("/v1/predictions", headers=keys.a).status_code == 401


def test_a_remembered_lookup_expires_and_an_unknown_token_is_remembered_as_unknown(monkeypatch):
    monkeypatch.setattr(auth, "CACHE_S", 0.2)
    known = auth.KnownKeys()
    caller = Caller(key_id="k1", name="one")
    known.put("digest-1", caller, time.monotonic())
    known.put("digest-2", None, time.monotonic())

    assert known.get("digest-1") == (True, caller)
    assert known.get("digest-2") == (True, None)
    assert known.get("digest-3") == (False, None)
    time.sleep(0.25)
    assert known.get("digest-1") == (False, None)


def test_forgetting_a_key_drops_every_token_lookup_that_found_it():
    known = auth.KnownKeys()
    now = time.monotonic()
    known.put("digest-1", Caller(key_id="k1", name="one"), now)
    known.put("digest-2", Caller(key_id="k2", name="two"), now)

    known.forget("k1")

    assert known.get("digest-1") == (False, None)
    assert known.get("digest-2")[0] is True


def test_a_lookup_counts_from_when_it_was_asked(monkeypatch):
    """A lookup that took a while is no younger than the database's answer: its CACHE_S starts when it was asked."""
    monkeypatch.setattr(auth, "CACHE_S", 0.2)
    known = auth.KnownKeys()

    known.put("digest-1", Caller(key_id="k1", name="one"), time.monotonic() - 0.3)

    assert known.get("digest-1") == (False, None)
