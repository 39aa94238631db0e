"""One router per kind, generated from the kind registry.

Cluster-scoped kinds live at ``/{plural}`` and ``/{plural}/{name}``; namespaced kinds at
``/{namespace}/{plural}[/{name}]`` plus ``GET /{plural}`` across namespaces. The handlers are the
same for every kind (see :mod:`skyshift.api.operations`); only the paths, the OpenAPI texts and
the authorization dependency differ, and what the kind's policy (:mod:`skyshift.api.policies`)
adds. ``PUT`` on a collection creates or replaces the object named in the body (what
``skyctl apply`` needs); ``PUT`` on an object replaces it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response

from skyshift.api import operations as ops
from skyshift.api.deps import Principal, authorize
from skyshift.api.operations import WatchArgs
from skyshift.api.policies import policy_of
from skyshift.api.watch import MAX_WATCH_TIMEOUT, NDJSON
from skyshift.models.registry import API_KINDS, KindInfo
from skyshift.store.codec import MAX_REVISION

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "Malformed JSON/YAML, a body past its limits (depth, YAML aliases), URL "
        "and body disagree, or a Link/Endpoints naming a cluster that does not exist"
    },
    404: {"description": "No such object, namespace or kind"},
    409: {"description": "Stale resourceVersion or already exists"},
    413: {"description": "Body larger than the limit"},
    415: {"description": "Unsupported content type"},
    422: {"description": "Invalid object; `error.field` names the bad field"},
    503: {"description": "etcd unavailable"},
}
_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/yaml": {"schema": {"type": "string"}},
        },
    }
}
_PATCH_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json-patch+json": {"schema": {"type": "array"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
        },
    }
}
_WATCH_DOC: dict[int | str, dict[str, Any]] = {200: {"content": {NDJSON: {}}}}

WatchParam = Query(False, description="Stream changes as ndjson events instead of returning")
RvParam = Query(
    None,
    alias="resourceVersion",
    description="With watch: stream the changes after this revision (omit: current objects "
    "first as ADDED, then changes)",
)
BookmarksParam = Query(
    False, alias="allowWatchBookmarks", description="Keep-alives as BOOKMARK events"
)
TimeoutParam = Query(
    None,
    alias="timeoutSeconds",
    ge=1,
    le=MAX_WATCH_TIMEOUT,
    description=f"End the watch after this many seconds (1-{MAX_WATCH_TIMEOUT})",
)
SelectorParam = Query(
    None, alias="labelSelector", description="e.g. `app=web,tier!=db,env in (a,b)`"
)
LimitParam = Query(None, ge=1, le=MAX_REVISION, description="Page size; follow `metadata.continue`")
ContinueParam = Query(None, alias="continue", description="Token from the previous page")
DeleteRvParam = Query(
    None, alias="resourceVersion", description="Precondition: delete only at this version"
)


def watch_args(
    watch: bool = WatchParam,
    rv: str | None = RvParam,
    bookmarks: bool = BookmarksParam,
    timeout: int | None = TimeoutParam,
) -> WatchArgs:
    """The watch query parameters of a list or get (a dependency: they are declared once)."""
    return WatchArgs(watch, rv, bookmarks, timeout)


# One set of routes serves both scopes: the namespace comes from a dependency that declares
# the ``{namespace}`` path parameter (so OpenAPI documents it) or yields None.
async def _namespace(
    namespace: str = Path(description="The namespace (e.g. `default`)"),
) -> str | None:
    return namespace


async def _no_namespace() -> str | None:
    return None


NamespaceDep = Callable[..., Awaitable[str | None]]


def _allowed(action: str, info: KindInfo) -> list[Any]:
    return [Depends(authorize(action, info))]


def _list_doc(info: KindInfo) -> dict[str, Any]:
    return {
        "summary": f"List {info.plural}",
        "description": f"List {info.plural}; `watch=true` streams changes as ndjson "
        "(`{type, object}` per line, see the watch semantics in the API docs).",
        "responses": _WATCH_DOC,
    }


def _add_list_all(router: APIRouter, info: KindInfo) -> None:
    """``GET /{plural}`` of a namespaced kind: its objects in every namespace."""

    @router.get(f"/{info.plural}", dependencies=_allowed("list", info), **_list_doc(info))
    async def list_all(
        request: Request,
        labelSelector: str | None = SelectorParam,
        limit: int | None = LimitParam,
        cont: str | None = ContinueParam,
        args: WatchArgs = Depends(watch_args),
    ) -> Response:
        return await ops.list_objects(request, info, None, labelSelector, limit, cont, args)


def _add_collection_routes(
    router: APIRouter, info: KindInfo, path: str, ns_param: NamespaceDep
) -> None:
    where = " in a namespace" if info.namespaced else ""

    @router.post(
        path,
        status_code=201,
        dependencies=_allowed("create", info),
        openapi_extra=_BODY_DOC,
        summary=f"Create a {info.kind}{where}",
        description="Body: JSON or YAML manifest. The server sets uid, "
        "creationTimestamp, generation and the default status.",
    )
    async def create_route(request: Request, namespace: str | None = Depends(ns_param)) -> Any:
        return await ops.create(request, info, namespace)

    @router.put(
        path,
        openapi_extra=_BODY_DOC,
        summary=f"Create or replace a {info.kind} (apply)",
        description="Creates the object named in the body (201) or replaces it (200); needs "
        "the `create` or the `update` permission accordingly.",
    )
    async def apply_route(
        request: Request,
        namespace: str | None = Depends(ns_param),
        user: Principal = Depends(authorize(None, info)),
    ) -> Any:
        return await ops.apply(request, info, namespace, user)

    @router.get(path, dependencies=_allowed("list", info), **_list_doc(info))
    async def list_route(
        request: Request,
        namespace: str | None = Depends(ns_param),
        labelSelector: str | None = SelectorParam,
        limit: int | None = LimitParam,
        cont: str | None = ContinueParam,
        args: WatchArgs = Depends(watch_args),
    ) -> Response:
        return await ops.list_objects(request, info, namespace, labelSelector, limit, cont, args)


@dataclass(frozen=True)
class _ObjectWrite:
    """A route that writes one object with a body (replace, patch)."""

    method: str
    action: str
    #: the route's name, from which OpenAPI makes the operation id
    route_name: str
    body_doc: dict[str, Any]
    verb: str
    description: str
    write: Callable[[Request, KindInfo, str | None, str], Awaitable[Response]]


_OBJECT_WRITES = (
    _ObjectWrite(
        "PUT",
        "update",
        "replace_route",
        _BODY_DOC,
        "Replace",
        "`metadata.resourceVersion`, when given, must be current (else "
        "409). uid, creationTimestamp and status are kept; generation goes up when the "
        "spec changed.",
        ops.replace,
    ),
    _ObjectWrite(
        "PATCH",
        "patch",
        "patch_route",
        _PATCH_DOC,
        "Patch",
        "JSON Patch (RFC 6902) or JSON Merge Patch (RFC 7386). A failing "
        "patch is 422; a concurrent change is 409.",
        ops.patch,
    ),
)


def _add_object_write(
    router: APIRouter, info: KindInfo, path: str, ns_param: NamespaceDep, spec: _ObjectWrite
) -> None:
    async def endpoint(
        request: Request, name: str, namespace: str | None = Depends(ns_param)
    ) -> Any:
        return await spec.write(request, info, namespace, name)

    router.add_api_route(
        path,
        endpoint,
        methods=[spec.method],
        name=spec.route_name,
        dependencies=_allowed(spec.action, info),
        openapi_extra=spec.body_doc,
        summary=f"{spec.verb} a {info.kind}",
        description=spec.description,
    )


def _add_item_routes(router: APIRouter, info: KindInfo, path: str, ns_param: NamespaceDep) -> None:
    kind = info.kind

    @router.get(
        path, dependencies=_allowed("get", info), summary=f"Get a {kind}", responses=_WATCH_DOC
    )
    async def get_route(
        request: Request,
        name: str,
        namespace: str | None = Depends(ns_param),
        args: WatchArgs = Depends(watch_args),
    ) -> Response:
        return await ops.get_one(request, info, namespace, name, args)

    for write in _OBJECT_WRITES:
        _add_object_write(router, info, path, ns_param, write)

    @router.delete(
        path,
        dependencies=_allowed("delete", info),
        summary=f"Delete a {kind}",
        description=policy_of(info).delete_doc,
        responses={202: {"description": "Deletion started"}},
    )
    async def delete_route(
        request: Request,
        name: str,
        namespace: str | None = Depends(ns_param),
        rv: str | None = DeleteRvParam,
    ) -> Any:
        return await ops.delete(request, info, namespace, name, rv)


def kind_router(info: KindInfo) -> tuple[APIRouter, APIRouter]:
    """``(top, namespaced)`` routers for one kind; include every ``top`` before any
    ``namespaced`` one so that literal ``/{plural}/...`` paths are tried first."""
    top = APIRouter(tags=[info.kind], responses=_ERRORS)
    nsr = APIRouter(tags=[info.kind], responses=_ERRORS)
    if info.namespaced:
        _add_list_all(top, info)
    collection = f"/{{namespace}}/{info.plural}" if info.namespaced else f"/{info.plural}"
    ns_param: NamespaceDep = _namespace if info.namespaced else _no_namespace
    router = nsr if info.namespaced else top
    _add_collection_routes(router, info, collection, ns_param)
    _add_item_routes(router, info, f"{collection}/{{name}}", ns_param)
    return top, nsr


def include_kind_routes(app: FastAPI) -> None:
    """Every kind's routes: the top-level ones, then the kinds' own extra routes (e.g. job
    logs, schedule trigger), then the namespaced object routes they must come before."""
    routers = [kind_router(k) for k in API_KINDS]
    for top, _ in routers:
        app.include_router(top)
    for info in API_KINDS:
        for extra in policy_of(info).routers:
            app.include_router(extra)
    for _, namespaced in routers:
        app.include_router(namespaced)
