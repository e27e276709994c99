"""The dashboard: a page served by the API that reads and writes through the same JSON API as everyone else.

Everything it loads comes from this service (app/dashboard/: hand-written HTML, JavaScript and CSS, charts drawn as
inline SVG); the Content-Security-Policy header forbids anything else.
"""

from __future__ import annotations

import html
from functools import lru_cache
from importlib import resources
from typing import Any, get_args

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api.deps import SettingsDep
from app.errors import NotFound
from understudy.estimator_info import DEFAULT_CPU_ESTIMATOR, DEFAULT_GPU_ESTIMATOR, ESTIMATORS
from understudy.results import Status
from understudy.workload import MemoryFormat, Mode, OptimizerName, Precision

router = APIRouter(prefix="/dashboard", include_in_schema=False)

STATIC = {"dashboard.js": "text/javascript; charset=utf-8", "populations.js": "text/javascript; charset=utf-8",
          "dashboard.css": "text/css; charset=utf-8"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@lru_cache(maxsize=8)
def asset(name: str) -> str:
    return resources.files("app.dashboard").joinpath(name).read_text(encoding="utf-8")


@router.get("", response_class=HTMLResponse)
def read_dashboard(request: Request) -> HTMLResponse:
    """The page. Its links are absolute under the app's root path, so it works behind a path prefix too."""
    base = html.escape(request.scope.get("root_path", "").rstrip("/"), quote=True)
    page = asset("index.html").replace("__BASE__", base)
    return HTMLResponse(page, headers={**HEADERS, "Cache-Control": "no-cache"})


@router.get("/")
def redirect_dashboard(request: Request) -> RedirectResponse:
    return RedirectResponse(request.scope.get("root_path", "").rstrip("/") + "/dashboard", status_code=307)


@router.get("/static/{name}")
def read_static(name: str) -> Response:
    """The scripts and the style sheet (only the names in STATIC exist)."""
    if name not in STATIC:
        raise NotFound(f"no dashboard file {name!r}")
    return Response(asset(name), media_type=STATIC[name], headers={**HEADERS, "Cache-Control": "no-cache"})


@router.get("/config.json")
def read_config(settings: SettingsDep) -> dict[str, Any]:
    """What the page's forms offer: estimators, workload choices, statuses and the service's limits."""
    return {
        "estimators": [{"name": info.name, "version": info.version, "needs_gpu": info.needs_gpu,
                        "summary": info.summary} for info in ESTIMATORS.values()],
        "default_estimators": {"gpu": DEFAULT_GPU_ESTIMATOR, "cpu": DEFAULT_CPU_ESTIMATOR},
        "statuses": [status.value for status in Status],
        "modes": list(get_args(Mode)),
        "precisions": list(get_args(Precision)),
        "optimizers": list(get_args(OptimizerName)),
        "memory_formats": list(get_args(MemoryFormat)),
        "max_targets": settings.max_targets,
        "require_api_key": settings.require_api_key,
        "read_requires_key": settings.read_requires_key,
    }
