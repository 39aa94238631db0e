"""One router per kind, generated from the kind registry.

Cluster-scoped kinds live at ``/{plural}`` and ``/{plural}/{name}``; namespaced kinds at
``/{namespace}/{plural}[/{name}]`` plus ``GET /{plural}`` across namespaces. The handlers are the
same for every kind (see :mod:`skyshift.api.handlers`); only the paths, the OpenAPI texts and
the authorization dependency differ. ``PUT`` on a collection creates or replaces the object
named in the body (what ``skyctl apply`` needs); ``PUT`` on an object replaces it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from skyshift.api import handlers, references
from skyshift.api.auth.audit import note
from skyshift.api.body import read_manifest, read_patch
from skyshift.api.deps import (
    Principal,
    authorize,
    check_access,
    check_role_grants,
    check_role_replace,
    check_spawns,
    check_watch,
    get_lifecycle,
    get_options,
    get_store,
    stamp_owner,
)
from skyshift.api.lifecycle import Lifecycle
from skyshift.api.watch import MAX_WATCH_TIMEOUT, NDJSON, watch_response
from skyshift.models.base import API_VERSION
from skyshift.models.registry import KindInfo
from skyshift.store import ObjectStore
from skyshift.store.codec import MAX_REVISION
from skyshift.store.errors import NotFound

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


def _list_body(info: KindInfo, items: list[dict[str, Any]], rv: str, cont: str | None) -> Any:
    return {
        "apiVersion": API_VERSION,
        "kind": f"{info.kind}List",
        "metadata": {"resourceVersion": rv, "continue": cont},
        "items": items,
    }


def _written(obj: dict[str, Any], status: int, warnings: list[str]) -> JSONResponse:
    """The response to a write, with a ``Warning`` header per warning (see references)."""
    response = JSONResponse(obj, status_code=status)
    for value in references.header_values(warnings):
        response.headers.append("Warning", value)
    return response


#: kinds whose lifecycles create other objects (checked against the caller's rights)
SPAWNING = ("Pipeline", "Schedule")


def _manifest_name(data: Any) -> str | None:
    meta = data.get("metadata") if isinstance(data, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def kind_router(info: KindInfo) -> tuple[APIRouter, APIRouter]:
    """``(top, namespaced)`` routers for one kind; include every ``top`` before any
    ``namespaced`` one so that literal ``/{plural}/...`` paths are tried first."""
    kind, plural = info.kind, info.plural
    top = APIRouter(tags=[kind], responses=_ERRORS)
    nsr = APIRouter(tags=[kind], responses=_ERRORS)

    def dep(action: str) -> list[Any]:
        return [Depends(authorize(action, info))]

    async def list_objects(
        request: Request,
        namespace: str | None,
        label_selector: str | None,
        limit: int | None,
        cont: str | None,
        watch: bool,
        rv: str | None,
        bookmarks: bool,
        timeout: int | None,
    ) -> Response:
        store: ObjectStore = get_store(request)
        if watch:
            await check_watch(request, info)
            return await watch_response(
                store,
                info,
                namespace,
                label_selector=label_selector,
                resource_version=rv,
                bookmarks=bookmarks,
                timeout_seconds=timeout,
                options=get_options(request).watch,
            )
        result = await store.list(
            plural, namespace, label_selector=label_selector, limit=limit, continue_token=cont
        )
        body = _list_body(info, result.items, result.resource_version, result.continue_token)
        return JSONResponse(body)

    list_doc = {
        "summary": f"List {plural}",
        "description": f"List {plural}; `watch=true` streams changes as ndjson "
        "(`{type, object}` per line, see the watch semantics in the API docs).",
        "responses": _WATCH_DOC,
    }
    sel = Query(None, alias="labelSelector", description="e.g. `app=web,tier!=db,env in (a,b)`")
    lim = Query(None, ge=1, le=MAX_REVISION, description="Page size; follow `metadata.continue`")
    con = Query(None, alias="continue", description="Token from the previous page")

    if info.namespaced:

        @top.get(f"/{plural}", dependencies=dep("list"), **list_doc)  # type: ignore[arg-type]
        async def list_all(
            request: Request,
            labelSelector: str | None = sel,
            limit: int | None = lim,
            cont: str | None = con,
            watch: bool = WatchParam,
            rv: str | None = RvParam,
            bookmarks: bool = BookmarksParam,
            timeout: int | None = TimeoutParam,
        ) -> Response:
            return await list_objects(
                request, None, labelSelector, limit, cont, watch, rv, bookmarks, timeout
            )

    def ns_of(namespace: str | None) -> str | None:
        return namespace if info.namespaced else None

    async def guard(request: Request, obj: dict[str, Any], creating: bool = False,
                    current: dict[str, Any] | None = None) -> None:
        """``creating``: a new object (or apply); a Pipeline's steps never change afterwards,
        so only a Schedule's later writes can make it create something else. ``current``: the
        stored object a patch applies to (a Schedule's owner stays)."""
        if kind == "Role":  # nobody writes a role granting more than they hold
            await check_role_grants(request, obj)
        elif kind == "Schedule" or (kind in SPAWNING and creating):
            await check_spawns(request, kind, obj)  # nor makes a lifecycle create what they
            # may not create themselves
        if kind == "Schedule":
            stamp_owner(request, obj, current)

    async def guard_stored(request: Request, current: dict[str, Any]) -> str:
        """A stored Role is replaced or deleted only by someone holding all it grants; returns
        its resourceVersion, the precondition of the write (so the role checked is the one
        written over)."""
        await check_role_replace(request, current)
        return str(current["metadata"]["resourceVersion"])

    async def pin_role(request: Request, data: dict[str, Any], name: str) -> dict[str, Any]:
        """``data`` (a Role replacing the stored ``name``) checked against the stored role and
        conditional on its resourceVersion, unless the body names one itself."""
        current = await handlers.get_object(get_store(request), info, name, None)
        rv = await guard_stored(request, current)
        meta = data.get("metadata")
        if meta is None or (isinstance(meta, dict) and meta.get("resourceVersion") is None):
            data = {**data, "metadata": {**(meta or {}), "resourceVersion": rv}}
        return data

    async def create(request: Request, namespace: str | None) -> Response:
        data = await read_manifest(request, get_options(request).limits)
        note(request, name=_manifest_name(data))
        await guard(request, data, creating=True)
        warnings: list[str] = []
        obj = await handlers.create(
            get_store(request), get_lifecycle(request), info, data, ns_of(namespace), warnings
        )
        return _written(obj, 201, warnings)

    async def apply(request: Request, namespace: str | None, user: Principal) -> Response:
        data = await read_manifest(request, get_options(request).limits)
        note(request, name=_manifest_name(data))
        await guard(request, data, creating=True)
        if kind == "Role" and (name := _manifest_name(data)):
            with contextlib.suppress(NotFound):  # a new role: nothing to write over
                await get_store(request).get(plural, name)
                data = await pin_role(request, data, name)

        async def check(action: str) -> None:
            note(request, action=action)
            await check_access(request, user, action, info, ns_of(namespace))

        warnings: list[str] = []
        obj, created = await handlers.apply(
            get_store(request),
            get_lifecycle(request),
            info,
            data,
            ns_of(namespace),
            check,
            warnings,
        )
        return _written(obj, 201 if created else 200, warnings)

    async def get_one(
        request: Request,
        namespace: str | None,
        name: str,
        watch: bool,
        rv: str | None,
        bookmarks: bool,
        timeout: int | None,
    ) -> Response:
        store = get_store(request)
        if watch:
            await check_watch(request, info)
            return await watch_response(
                store,
                info,
                ns_of(namespace),
                name=name,
                resource_version=rv,
                bookmarks=bookmarks,
                timeout_seconds=timeout,
                options=get_options(request).watch,
            )
        return JSONResponse(await handlers.get_object(store, info, name, ns_of(namespace)))

    async def replace(request: Request, namespace: str | None, name: str) -> Response:
        data = await read_manifest(request, get_options(request).limits)
        await guard(request, data)
        if kind == "Role":
            data = await pin_role(request, data, name)
        warnings: list[str] = []
        obj = await handlers.replace(
            get_store(request), get_lifecycle(request), info, data, ns_of(namespace), name, warnings
        )
        return _written(obj, 200, warnings)

    async def patch(request: Request, namespace: str | None, name: str) -> Response:
        limits = get_options(request).limits
        patch_kind, doc = await read_patch(request, limits)
        expected: str | None = None
        warnings: list[str] = []
        if kind == "Role":
            current = await handlers.get_object(get_store(request), info, name, ns_of(namespace))
            expected = await guard_stored(request, current)
            await guard(request, await handlers.patched_copy(current, patch_kind, doc, limits))
        elif kind == "Schedule":
            current = await handlers.get_object(get_store(request), info, name, ns_of(namespace))
            await guard(request, await handlers.patched_copy(current, patch_kind, doc, limits),
                        current=current)
        obj = await handlers.patch(
            get_store(request),
            get_lifecycle(request),
            info,
            name,
            ns_of(namespace),
            patch_kind,
            doc,
            limits,
            expected_rv=expected,
            warnings=warnings,
        )
        return _written(obj, 200, warnings)

    async def delete(
        request: Request, namespace: str | None, name: str, rv: str | None
    ) -> Response:
        lifecycle: Lifecycle | None = get_lifecycle(request)
        if kind == "Role":
            current = await handlers.get_object(get_store(request), info, name, None)
            stored_rv = await guard_stored(request, current)
            rv = rv or stored_rv
        obj, finished = await handlers.delete(
            get_store(request), lifecycle, info, name, ns_of(namespace), rv
        )
        return JSONResponse(obj, status_code=200 if finished else 202)

    coll = f"/{{namespace}}/{plural}" if info.namespaced else f"/{plural}"
    item = f"{coll}/{{name}}"
    router = nsr if info.namespaced else top
    where = " in a namespace" if info.namespaced else ""
    delete_desc = (
        "Objects with a lifecycle get `deletionTimestamp` and phase Deleting (202); their "
        "workflow tears them down and removes them. Others are removed at once (200)."
    )
    if kind == "Namespace":
        delete_desc = "Refused for `default` (403) and for non-empty namespaces (409)."

    # One set of routes serves both scopes: the namespace comes from a dependency that
    # declares the ``{namespace}`` path parameter (so OpenAPI documents it) or yields None.
    async def _namespace(
        namespace: str = Path(description="The namespace (e.g. `default`)"),
    ) -> str | None:
        return namespace

    async def _no_namespace() -> str | None:
        return None

    ns_param: Callable[..., Awaitable[str | None]] = (
        _namespace if info.namespaced else _no_namespace
    )

    @router.post(
        coll,
        status_code=201,
        dependencies=dep("create"),
        openapi_extra=_BODY_DOC,
        summary=f"Create a {kind}{where}",
        description="Body: JSON or YAML manifest. The server sets uid, "
        "creationTimestamp, generation and the default status.",
    )
    async def create_route(request: Request, namespace: str | None = Depends(ns_param)) -> Any:
        return await create(request, namespace)

    @router.put(
        coll,
        openapi_extra=_BODY_DOC,
        summary=f"Create or replace a {kind} (apply)",
        description="Creates the object named in the body (201) or replaces it (200); needs "
        "the `create` or the `update` permission accordingly.",
    )
    async def apply_route(
        request: Request,
        namespace: str | None = Depends(ns_param),
        user: Principal = Depends(authorize(None, info)),
    ) -> Any:
        return await apply(request, namespace, user)

    @router.get(coll, dependencies=dep("list"), **list_doc)  # type: ignore[arg-type]
    async def list_route(
        request: Request,
        namespace: str | None = Depends(ns_param),
        labelSelector: str | None = sel,
        limit: int | None = lim,
        cont: str | None = con,
        watch: bool = WatchParam,
        rv: str | None = RvParam,
        bookmarks: bool = BookmarksParam,
        timeout: int | None = TimeoutParam,
    ) -> Response:
        return await list_objects(
            request, namespace, labelSelector, limit, cont, watch, rv, bookmarks, timeout
        )

    @router.get(item, dependencies=dep("get"), summary=f"Get a {kind}", responses=_WATCH_DOC)
    async def get_route(
        request: Request,
        name: str,
        namespace: str | None = Depends(ns_param),
        watch: bool = WatchParam,
        rv: str | None = RvParam,
        bookmarks: bool = BookmarksParam,
        timeout: int | None = TimeoutParam,
    ) -> Response:
        return await get_one(request, namespace, name, watch, rv, bookmarks, timeout)

    @router.put(
        item,
        dependencies=dep("update"),
        openapi_extra=_BODY_DOC,
        summary=f"Replace a {kind}",
        description="`metadata.resourceVersion`, when given, must be current (else "
        "409). uid, creationTimestamp and status are kept; generation goes up when the "
        "spec changed.",
    )
    async def replace_route(
        request: Request, name: str, namespace: str | None = Depends(ns_param)
    ) -> Any:
        return await replace(request, namespace, name)

    @router.patch(
        item,
        dependencies=dep("patch"),
        openapi_extra=_PATCH_DOC,
        summary=f"Patch a {kind}",
        description="JSON Patch (RFC 6902) or JSON Merge Patch (RFC 7386). A failing "
        "patch is 422; a concurrent change is 409.",
    )
    async def patch_route(
        request: Request, name: str, namespace: str | None = Depends(ns_param)
    ) -> Any:
        return await patch(request, namespace, name)

    @router.delete(
        item,
        dependencies=dep("delete"),
        summary=f"Delete a {kind}",
        description=delete_desc,
        responses={202: {"description": "Deletion started"}},
    )
    async def delete_route(
        request: Request,
        name: str,
        namespace: str | None = Depends(ns_param),
        rv: str | None = Query(
            None, alias="resourceVersion", description="Precondition: delete only at this version"
        ),
    ) -> Any:
        return await delete(request, namespace, name, rv)

    return top, nsr
