"""The API's documentation pages (Swagger UI at /docs, ReDoc at /redoc), served with their scripts from this
service: the assets come from the pinned fastapi-offline package, never from a CDN. The dashboard keeps an API key
in this origin's sessionStorage, so no third-party script may run here; the Content-Security-Policy says so too."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from app.errors import NotFound

router = APIRouter(include_in_schema=False)

STATIC_PREFIX = "/docs-static"
ASSETS = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8",
          "redoc.standalone.js": "text/javascript; charset=utf-8", "favicon.png": "image/png"}
# The pages' own start-up code is inline (FastAPI writes it), everything else comes from here.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _asset(name: str) -> bytes:
    return resources.files("fastapi_offline").joinpath("static", name).read_bytes()


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


@router.get("/docs")
def read_swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title="Understudy - Swagger UI",
                               swagger_js_url=f"{root}{STATIC_PREFIX}/swagger-ui-bundle.js",
                               swagger_css_url=f"{root}{STATIC_PREFIX}/swagger-ui.css",
                               swagger_favicon_url=f"{root}{STATIC_PREFIX}/favicon.png")
    return HTMLResponse(page.body, headers=HEADERS)


@router.get("/redoc")
def read_redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_redoc_html(openapi_url=f"{root}/openapi.json", title="Understudy - ReDoc",
                          redoc_js_url=f"{root}{STATIC_PREFIX}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}{STATIC_PREFIX}/favicon.png", with_google_fonts=False)
    return HTMLResponse(page.body, headers=HEADERS)


@router.get(STATIC_PREFIX + "/{name}")
def read_docs_asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFound(f"no documentation asset {name!r}")
    return Response(_asset(name), media_type=ASSETS[name], headers={**HEADERS, "Cache-Control": "max-age=86400"})
