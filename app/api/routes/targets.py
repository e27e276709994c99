"""The target catalog, and the calibrations users give for its targets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from app import crud
from app.api.deps import ReadKeyDep, SessionDep, SettingsDep, WriteKeyDep
from app.errors import NotFound
from app.schemas import (CalibrationCreate, CalibrationPublic, CalibrationsPublic, ErrorPublic, TargetPublic,
                         TargetsPublic, calibration_public)
from understudy.catalog import TargetSpec, catalog
from understudy.errors import UnknownTarget

router = APIRouter(prefix="/v1/targets", tags=["targets"])

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "no catalog GPU matches (or several do)"}}


def _target(target_id: str) -> TargetSpec:
    try:
        return catalog().get(target_id)
    except UnknownTarget as exc:
        raise NotFound(str(exc)) from None


@router.get("", response_model=TargetsPublic)
def read_targets(caller: ReadKeyDep) -> TargetsPublic:
    """Every GPU in the catalog, with its specification and sources."""
    data = [TargetPublic(**spec.model_dump()) for spec in catalog()]
    return TargetsPublic(data=data, count=len(data))


@router.get("/{target_id}", response_model=TargetPublic, responses=NOT_FOUND)
def read_target(target_id: str, caller: ReadKeyDep) -> TargetPublic:
    """One GPU, by id or by a name or alias that means exactly one ("RTX 3090", "rtx3090")."""
    return TargetPublic(**_target(target_id).model_dump())


@router.post(
    "/{target_id}/calibrations",
    status_code=status.HTTP_201_CREATED,
    response_model=CalibrationPublic,
    responses={**NOT_FOUND,
               401: {"model": ErrorPublic, "description": "no API key, or an unknown one"},
               422: {"model": ErrorPublic, "description": "a point is invalid (named in errors[].field)"}},
)
def create_calibration(target_id: str, body: CalibrationCreate, session: SessionDep, settings: SettingsDep,
                       caller: WriteKeyDep) -> CalibrationPublic:
    """Store a few measured step times of this target. The caller's predictions with estimator "calibrated" then
    scale the base estimator's prediction by a correction fitted to these points (the caller's latest calibration of
    the target is used; another key's requests use it only when they name its id)."""
    row = crud.create_calibration(session=session, settings=settings, target=_target(target_id), request=body,
                                  caller=caller)
    return calibration_public(row)


@router.get("/{target_id}/calibrations", response_model=CalibrationsPublic, responses=NOT_FOUND)
def read_calibrations(target_id: str, session: SessionDep, caller: ReadKeyDep) -> CalibrationsPublic:
    """The caller's calibrations of this target, latest first (the one its predictions use)."""
    rows = crud.list_calibrations(session=session, target_id=_target(target_id).id,
                                  owner=crud.visible_owner(caller))
    return CalibrationsPublic(data=[calibration_public(row) for row in rows], count=len(rows))
