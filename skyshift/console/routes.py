"""Routes of the web console: the page, its static files and the little config it needs.

The page and its files need no token (they hold no data); everything they show comes from the
API's own routes, called with the bearer token the user gets by logging in on the page.
``GET /console/config`` (which does need a token: the API mounts :data:`config_router` behind its
own authentication) tells the page where the Temporal UI is, so each lifecycle can link to its
workflow there; ``GET /console/kinds`` (the same) gives it the table of kinds with a lifecycle
(:data:`skyshift.contract.lifecycles.LIFECYCLES`), so the page builds workflow ids, ends a job's
log follow and names objects from the table instead of lists of its own. Every console
response carries a strict Content-Security-Policy: scripts only from this server, no inline
script, no other origin. The console sits below the API: it imports nothing of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from skyshift.config import Settings
from skyshift.contract.lifecycles import LIFECYCLES
from skyshift.models.registry import kind_info

STATIC = Path(__file__).parent / "static"

#: The files the console serves, by name, and their media types: nothing else under the package
#: directory is reachable (no path from the URL ever touches the file system).
MEDIA_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
FILES = {p.name: MEDIA_TYPES[p.suffix] for p in STATIC.iterdir() if p.suffix in MEDIA_TYPES}

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(prefix="/console", include_in_schema=False)
#: routes that need a signed-in user (the API adds its authentication when it mounts them)
config_router = APIRouter(prefix="/console", include_in_schema=False)


def _file(name: str) -> Response:
    return FileResponse(STATIC / name, media_type=FILES[name], headers=HEADERS)


@router.get("")
async def console_root(request: Request) -> Response:
    # Relative, so the console also works behind a proxy that serves the API under a prefix;
    # the query (e.g. ``?watch=off``) is kept.
    query = request.url.query
    return RedirectResponse(f"console/{'?' + query if query else ''}", 307, headers=HEADERS)


@router.get("/")
async def console_page() -> Response:
    return _file("index.html")


@router.get("/static/{name}")
async def console_file(name: str) -> Response:
    if name not in FILES:
        raise HTTPException(404, f"no console file {name!r}")
    return _file(name)


def temporal_ui(settings: Settings) -> str:
    """The Temporal UI's base URL, or "" when it is not an http(s) URL (never a script URL)."""
    url = settings.temporal_ui_url.strip().rstrip("/")
    parts = urlsplit(url)
    return url if parts.scheme in ("http", "https") and parts.netloc else ""


@config_router.get("/config")
async def console_config(request: Request) -> Any:
    settings: Settings = request.app.state.settings
    return JSONResponse(
        {
            "temporalUi": temporal_ui(settings),
            "temporalNamespace": settings.temporal_namespace,
        },
        headers=HEADERS,
    )


def kind_table() -> list[dict[str, Any]]:
    """What the console needs of each kind with a lifecycle: its names, its workflow id scheme
    (``<prefix>/<ns>/<name>`` when namespaced, else ``<prefix>/<name>``), its first phase and
    the phases in which its workflow has ended."""
    return [
        {
            "kind": lc.kind,
            "plural": kind_info(lc.kind).plural,
            "namespaced": lc.namespaced,
            "workflowIdPrefix": lc.id_prefix,
            "firstPhase": lc.first_phase,
            "ended": list(lc.ended),
        }
        for lc in LIFECYCLES
    ]


@config_router.get("/kinds")
async def console_kinds() -> Any:
    return JSONResponse({"kinds": kind_table()}, headers=HEADERS)
