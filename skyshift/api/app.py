"""The FastAPI application factory of the (stateless) API server.

``create_app`` wires the kind routers, job logs/exec, health probes and error handlers around
one ObjectStore and an optional Lifecycle. The server keeps no state of its own, so any number
of replicas can serve the same etcd. Tests pass their own store and a recording lifecycle;
``python -m skyshift.api`` builds both from the environment.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse

from skyshift.api import errors, handlers
from skyshift.api.auth import AuthConfig, AuthService
from skyshift.api.auth import routes as auth_routes
from skyshift.api.auth.audit import AuditMiddleware
from skyshift.api.clientaddr import ClientAddressMiddleware, Network, proxies_from_env
from skyshift.api.deps import current_user
from skyshift.api.errors import ApiError
from skyshift.api.lifecycle import Lifecycle, TemporalLifecycle
from skyshift.api.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_PATCH_OPS,
    Limits,
)
from skyshift.api.metrics import MetricsMiddleware
from skyshift.api.paths import KindPathMiddleware
from skyshift.api.policies import policy_of
from skyshift.api.routes import include_kind_routes
from skyshift.api.watch import WatchOptions
from skyshift.compat import registry  # noqa: F401  (declares the managers spec.manager accepts)
from skyshift.config import Settings
from skyshift.console import routes as console_routes
from skyshift.models.registry import API_KINDS
from skyshift.store import ObjectStore, StoreError

log = logging.getLogger(__name__)

DESCRIPTION = """
SkyShift's REST API: Kubernetes-style objects (Cluster, Job, Pipeline, Schedule, Service,
Endpoints, FilterPolicy, Link, Namespace, Role) kept in etcd, whose lifecycles run as Temporal
workflows.

* **Bodies**: JSON or YAML (`Content-Type: application/yaml`); PATCH takes JSON Patch
  (`application/json-patch+json`) or merge patch (`application/merge-patch+json`).
* **Concurrency**: `metadata.resourceVersion` is the etcd revision of the object; a PUT or
  PATCH against a stale one gets 409 with the current one in `error.resourceVersion`.
* **Watch**: `?watch=true` on a list or get streams ndjson lines `{"type": "ADDED|MODIFIED|
  DELETED", "object": {...}}`. Without `resourceVersion` the current objects come first as
  ADDED; with `resourceVersion=N` exactly the changes after N. A compacted N is 410. Idle
  streams get a blank line every few seconds (or BOOKMARK events with
  `allowWatchBookmarks=true`); on a late failure the last line is `{"type": "ERROR", ...}`.
  A watch needs the `watch` permission besides `list` (or `get`); `watch` is a boolean
  (`true`, `t`, `yes`, `y`, `on`, `1` in any case, or the same spellings of false; anything
  else is 422), and every spelling of true is a watch for the permission check too.
  `timeoutSeconds` (1-3600) ends the stream. `resourceVersion`, `limit` and the revision in a
  `continue` token must fit etcd's int64 (ASCII digits); otherwise a 400/422 names them.
* **Auth**: every route but `/healthz`, `/readyz`, `/token` and `/register_user` needs
  `Authorization: Bearer <token>`; get one from `POST /token` (the "Authorize" button here does
  that). Tokens expire; 401 means log in again, 403 that your roles do not allow the action.
* **Errors**: always `{"error": {"code", "reason", "message", "field"?, "details"?,
  "resourceVersion"?}}`.
"""


@dataclass
class ApiOptions:
    """Server knobs that are not part of the shared Settings."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: What a body may hold once decoded (see :mod:`skyshift.api.limits`).
    max_depth: int = DEFAULT_MAX_DEPTH
    max_nodes: int = DEFAULT_MAX_NODES
    max_patch_ops: int = DEFAULT_MAX_PATCH_OPS
    watch: WatchOptions = field(default_factory=WatchOptions)
    #: Peers whose ``X-Forwarded-For`` is believed (``SKYSHIFT_TRUSTED_PROXIES``; see
    #: :mod:`skyshift.api.clientaddr`). Empty: the header is ignored.
    trusted_proxies: tuple[Network, ...] = ()
    #: Seconds a readiness probe waits for etcd / Temporal.
    probe_timeout: float = 2.0

    @classmethod
    def from_env(cls) -> ApiOptions:
        opts = cls()
        if value := os.environ.get("SKYSHIFT_API_MAX_BODY_BYTES"):
            opts.max_body_bytes = int(value)
        if value := os.environ.get("SKYSHIFT_API_MAX_DEPTH"):
            opts.max_depth = int(value)
        if value := os.environ.get("SKYSHIFT_API_MAX_NODES"):
            opts.max_nodes = int(value)
        if value := os.environ.get("SKYSHIFT_API_MAX_PATCH_OPS"):
            opts.max_patch_ops = int(value)
        if value := os.environ.get("SKYSHIFT_API_WATCH_KEEPALIVE"):
            opts.watch.keepalive = float(value)
        opts.trusted_proxies = proxies_from_env()
        return opts

    @property
    def limits(self) -> Limits:
        return Limits(self.max_body_bytes, self.max_depth, self.max_nodes, self.max_patch_ops)


def create_app(
    settings: Settings | None = None,
    *,
    store: ObjectStore | None = None,
    lifecycle: Lifecycle | None = None,
    temporal: bool = False,
    options: ApiOptions | None = None,
    auth: AuthConfig | bool | None = None,
) -> FastAPI:
    """Build the API app.

    ``store``: use this store (the caller connects and closes it); otherwise one is built from
    ``settings`` and connected/closed with the app. ``lifecycle``: hooks for Job/Cluster;
    with ``temporal=True`` and no lifecycle, a :class:`TemporalLifecycle` connecting lazily to
    ``settings.temporal_address`` is used. Without either, objects with a lifecycle are
    stored but no workflow is told, and DELETE removes them at once.

    ``auth``: authentication and authorization are always on unless ``auth=False`` is passed,
    which only tests of unrelated behaviour should do; an :class:`AuthConfig` overrides the
    settings read from the environment (key file, token lifetime, throttling...).
    """
    settings = settings or Settings.from_env()
    opts = options or ApiOptions.from_env()
    parts = _Parts(
        store=store or ObjectStore(settings.etcd_endpoints, settings.store_prefix),
        own_store=store is None,
        lifecycle=lifecycle,
    )
    if lifecycle is None and temporal:
        parts.lifecycle = parts.own_lifecycle = TemporalLifecycle.lazy(
            settings.temporal_address, settings.temporal_namespace
        )
    if auth is False:
        log.warning("authentication is OFF for this app (auth=False): test use only")
    else:
        config = auth if isinstance(auth, AuthConfig) else AuthConfig.from_env(settings)
        parts.auth = AuthService(parts.store, config)

    app = FastAPI(
        title="SkyShift API",
        version="1",
        description=DESCRIPTION,
        lifespan=parts.lifespan,
        openapi_tags=[{"name": k.kind, "description": policy_of(k).doc} for k in API_KINDS]
        + [{"name": "Health", "description": "Liveness and readiness probes"}],
    )
    app.state.store = parts.store
    app.state.lifecycle = parts.lifecycle
    app.state.options = opts
    app.state.settings = settings
    app.state.auth = parts.auth
    errors.install(app)
    _health_routes(app)
    app.include_router(auth_routes.router)
    app.include_router(console_routes.router)  # the web console: /console
    app.include_router(console_routes.config_router, dependencies=[Depends(current_user)])
    include_kind_routes(app)
    _fallback_routes(app)
    app.add_middleware(MetricsMiddleware)  # innermost: sees the route the router matched
    app.add_middleware(AuditMiddleware, writer=_audit_writer(parts.auth))
    app.add_middleware(KindPathMiddleware)
    app.add_middleware(ClientAddressMiddleware, proxies=opts.trusted_proxies)
    return app


@dataclass
class _Parts:
    """What an app serves with, and which of it the app itself starts and stops."""

    store: ObjectStore
    own_store: bool
    lifecycle: Lifecycle | None
    own_lifecycle: TemporalLifecycle | None = None
    auth: AuthService | None = None

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        try:
            if self.own_store:
                await self.store.connect()
            await handlers.ensure_default_namespace(self.store)
        except StoreError as exc:
            # Start anyway: /readyz reports etcd, and `default` is created on first use.
            log.warning("etcd not reachable at startup (%s); serving, not ready", exc)
        if self.auth is not None:
            await self.auth.start()
        try:
            yield
        finally:
            if self.auth is not None:
                await self.auth.stop()
            if self.own_lifecycle is not None:
                await self.own_lifecycle.close()
            if self.own_store:
                await self.store.close()


def _audit_writer(auth: AuthService | None) -> Callable[[dict[str, Any]], Awaitable[None]] | None:
    """Record a mutation; one that changed roles or users also refreshes this replica's cache."""
    if auth is None:
        return None

    async def write(fields: dict[str, Any]) -> None:
        if fields.get("resource") in ("roles", "users"):
            auth.directory.invalidate()
        await auth.audit.write(fields)

    return write


def _health_routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["Health"], summary="Liveness: the process serves requests")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["Health"],
        summary="Readiness: etcd (and Temporal, when configured) reachable",
        description=(
            "`?exclude=temporal` leaves Temporal out: what a load balancer in front of several "
            "replicas should check, since every replica loses Temporal at once and each still "
            "serves reads and writes (notifications are sent again when Temporal is back)."
        ),
        responses={503: {"description": "A dependency is down; the message names it"}},
    )
    async def readyz(
        request: Request,
        exclude: Annotated[list[Literal["temporal"]] | None, Query()] = None,
    ) -> Any:
        store: ObjectStore = request.app.state.store
        lifecycle: Lifecycle | None = request.app.state.lifecycle
        timeout = request.app.state.options.probe_timeout
        checks: dict[str, str] = {}
        try:
            revision = await asyncio.wait_for(store.revision(), timeout)
            checks["etcd"] = f"ok (revision {revision})"
        except (StoreError, TimeoutError) as exc:
            checks["etcd"] = f"unavailable: {exc or 'no answer within ' + str(timeout) + 's'}"
        auth: AuthService | None = request.app.state.auth
        if auth is not None:
            checks["auth"] = "ok" if auth.ready else "unavailable: bootstrap pending"
        if lifecycle is not None and "temporal" not in (exclude or []):
            try:
                ok = await asyncio.wait_for(lifecycle.ready(), timeout)
            except Exception:
                ok = False
            checks["temporal"] = "ok" if ok else "unavailable"
        down = [part for part, state in checks.items() if not state.startswith("ok")]
        if down:
            err = ApiError(
                503,
                "not ready: " + "; ".join(f"{p} {checks[p]}" for p in down),
                details=[{"field": p, "message": checks[p]} for p in down],
            )
            return err.response()
        return JSONResponse({"status": "ok", "checks": checks})


def _fallback_routes(app: FastAPI) -> None:
    """Unknown kinds get a 404 naming the known ones; known paths with a wrong method 405."""
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]

    async def fallback(request: Request) -> Any:
        path = request.url.path
        segments = [s for s in path.split("/") if s]
        known = {k.plural: k for k in API_KINDS}
        if len(segments) == 1 or (len(segments) == 2 and segments[0] in known):
            kind = segments[0]
        else:
            kind = segments[1] if len(segments) > 1 else ""
        if kind not in known or len(segments) > 3:
            expected = ", ".join(sorted(known))
            raise ApiError(404, f"unknown kind or path {path!r}: kinds are {expected}")
        if len(segments) == 2 and segments[0] == kind and known[kind].namespaced:
            raise ApiError(
                404, f"{known[kind].kind} is namespaced: use /{{namespace}}/{kind}/{segments[1]}"
            )
        raise ApiError(405, f"{request.method} is not allowed on {path}")

    for path in ("/{a}", "/{a}/{b}", "/{a}/{b}/{c}", "/{a}/{b}/{c}/{d:path}"):
        app.add_api_route(
            path,
            fallback,
            methods=methods,
            include_in_schema=False,
            dependencies=[Depends(current_user)],
        )
