"""API keys: a random token shown once; the store keeps its sha256 and a short prefix to find it by. A key is an
owner: it sees the rows it made; an admin key sees every owner's rows and manages keys."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ledger.models import ApiKey, utcnow

TOKEN_TAG = "us_"
PREFIX_CHARS = 12


def generate_token() -> str:
    return TOKEN_TAG + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: an API key's id, name and scope (copied out of its row, so it outlives the session)."""

    key_id: str
    name: str
    admin: bool = False

    @classmethod
    def of(cls, key: ApiKey) -> Caller:
        return cls(key_id=key.id, name=key.name, admin=bool(key.admin))


def create_api_key(*, session: Session, name: str, admin: bool = False) -> tuple[ApiKey, str]:
    """A new key row and its token (the only time the token exists in clear)."""
    token = generate_token()
    key = ApiKey(name=name, prefix=token[:PREFIX_CHARS], key_hash=hash_token(token), admin=admin)
    session.add(key)
    session.commit()
    return key, token


def authenticate(*, session: Session, token: str) -> ApiKey | None:
    """The live key this token belongs to, compared in constant time; None for an unknown or revoked token."""
    digest = hash_token(token)
    candidates = session.scalars(
        select(ApiKey).where(ApiKey.prefix == token[:PREFIX_CHARS], ApiKey.revoked_at.is_(None))
    ).all()
    for key in candidates:
        if hmac.compare_digest(key.key_hash, digest):
            return key
    return None


def revoke_api_key(*, session: Session, key_id_or_prefix: str) -> int:
    """Revoke keys by id or prefix; returns how many were revoked."""
    keys = session.scalars(
        select(ApiKey).where(
            (ApiKey.id == key_id_or_prefix) | (ApiKey.prefix == key_id_or_prefix), ApiKey.revoked_at.is_(None)
        )
    ).all()
    for key in keys:
        key.revoked_at = utcnow()
    session.commit()
    return len(keys)
