"""The target catalog."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ReadKeyDep
from app.errors import NotFound
from app.schemas import ErrorPublic, TargetPublic, TargetsPublic
from understudy.catalog import catalog
from understudy.errors import UnknownTarget

router = APIRouter(prefix="/v1/targets", tags=["targets"])


@router.get("", response_model=TargetsPublic)
def read_targets(key: ReadKeyDep) -> TargetsPublic:
    """Every GPU in the catalog, with its specification and sources."""
    data = [TargetPublic(**spec.model_dump()) for spec in catalog()]
    return TargetsPublic(data=data, count=len(data))


@router.get("/{target_id}", response_model=TargetPublic,
            responses={404: {"model": ErrorPublic, "description": "no catalog GPU matches (or several do)"}})
def read_target(target_id: str, key: ReadKeyDep) -> TargetPublic:
    """One GPU, by id or by a name or alias that means exactly one ("RTX 3090", "rtx3090")."""
    try:
        spec = catalog().get(target_id)
    except UnknownTarget as exc:
        raise NotFound(str(exc)) from None
    return TargetPublic(**spec.model_dump())
