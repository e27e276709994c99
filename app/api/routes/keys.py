"""API keys, for an admin key: list them, make one (its token is shown once), revoke one."""

from __future__ import annotations

from fastapi import APIRouter, status
from sqlalchemy import select

from app.api.deps import AdminDep, SessionDep
from app.auth import known_keys
from app.errors import NotFound
from app.schemas import COMMON_ERRORS, ApiKeyCreate, ApiKeyCreatedPublic, ApiKeyPublic, ApiKeysPublic, ErrorPublic
from app.security import create_api_key, revoke_api_key
from ledger.models import ApiKey

router = APIRouter(prefix="/v1/keys", tags=["keys"])

ADMIN_ONLY = {403: {"model": ErrorPublic, "description": "the key is not an admin key"}, **COMMON_ERRORS}


@router.get("", response_model=ApiKeysPublic, responses=ADMIN_ONLY)
def read_keys(session: SessionDep, admin: AdminDep) -> ApiKeysPublic:
    """Every key, oldest first (never a token: the store has only their hashes)."""
    keys = session.scalars(select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)).all()
    return ApiKeysPublic(data=[ApiKeyPublic.model_validate(key, from_attributes=True) for key in keys],
                         count=len(keys))


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ApiKeyCreatedPublic, responses=ADMIN_ONLY)
def create_key(body: ApiKeyCreate, session: SessionDep, admin: AdminDep) -> ApiKeyCreatedPublic:
    """A new key; its token is in this answer and nowhere else."""
    key, token = create_api_key(session=session, name=body.name, admin=body.admin)
    return ApiKeyCreatedPublic(**ApiKeyPublic.model_validate(key, from_attributes=True).model_dump(), token=token)


@router.delete("/{key_id}", response_model=ApiKeyPublic, responses=ADMIN_ONLY)
def revoke_key(key_id: str, session: SessionDep, admin: AdminDep) -> ApiKeyPublic:
    """Revoke a key: it stops working at once here, and within a few seconds in the service's other processes
    (app/auth.py remembers a key briefly)."""
    key = session.get(ApiKey, key_id)
    if key is None:
        raise NotFound(f"no API key with id {key_id!r}")
    revoke_api_key(session=session, key_id_or_prefix=key.id)
    known_keys.forget(key.id)
    session.refresh(key)
    return ApiKeyPublic.model_validate(key, from_attributes=True)
