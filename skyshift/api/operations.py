"""The object routes' request handling, the same for every kind: read the request, apply the
kind's policy (:mod:`skyshift.api.policies`), call the store operation
(:mod:`skyshift.api.handlers`) and answer. :mod:`skyshift.api.routes` binds these to paths.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from skyshift.api import handlers, references
from skyshift.api.auth.audit import note
from skyshift.api.body import read_manifest, read_patch
from skyshift.api.deps import (
    Principal,
    check_access,
    check_watch,
    get_lifecycle,
    get_options,
    get_store,
)
from skyshift.api.policies import KindPolicy, policy_of
from skyshift.api.watch import watch_response
from skyshift.models.base import API_VERSION
from skyshift.models.registry import KindInfo
from skyshift.store.errors import NotFound

Obj = dict[str, Any]


@dataclass(frozen=True)
class WatchArgs:
    """The watch parameters of a list or get."""

    watch: bool
    resource_version: str | None
    bookmarks: bool
    timeout: int | None


def _written(obj: Obj, status: int, warnings: list[str]) -> JSONResponse:
    """The response to a write, with a ``Warning`` header per warning (see references)."""
    response = JSONResponse(obj, status_code=status)
    for value in references.header_values(warnings):
        response.headers.append("Warning", value)
    return response


def _manifest_name(data: Any) -> str | None:
    meta = data.get("metadata") if isinstance(data, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


async def _watch(
    request: Request,
    info: KindInfo,
    namespace: str | None,
    args: WatchArgs,
    *,
    name: str | None = None,
    label_selector: str | None = None,
) -> Response:
    await check_watch(request, info)
    return await watch_response(
        get_store(request),
        info,
        namespace,
        name=name,
        label_selector=label_selector,
        resource_version=args.resource_version,
        bookmarks=args.bookmarks,
        timeout_seconds=args.timeout,
        options=get_options(request).watch,
    )


async def list_objects(
    request: Request,
    info: KindInfo,
    namespace: str | None,
    label_selector: str | None,
    limit: int | None,
    cont: str | None,
    args: WatchArgs,
) -> Response:
    if args.watch:
        return await _watch(request, info, namespace, args, label_selector=label_selector)
    result = await get_store(request).list(
        info.plural, namespace, label_selector=label_selector, limit=limit, continue_token=cont
    )
    return JSONResponse(
        {
            "apiVersion": API_VERSION,
            "kind": f"{info.kind}List",
            "metadata": {
                "resourceVersion": result.resource_version,
                "continue": result.continue_token,
            },
            "items": result.items,
        }
    )


async def get_one(
    request: Request, info: KindInfo, namespace: str | None, name: str, args: WatchArgs
) -> Response:
    if args.watch:
        return await _watch(request, info, namespace, args, name=name)
    obj = await handlers.get_object(get_store(request), info, name, namespace)
    return JSONResponse(obj)


async def _check_body(
    request: Request,
    policy: KindPolicy,
    obj: Obj,
    *,
    creating: bool = False,
    current: Obj | None = None,
) -> None:
    """The kind's checks of a body about to be written (``creating``: a create or apply;
    ``current``: the stored object a patch applies to)."""
    if creating and policy.on_create is not None:
        await policy.on_create(request, obj, current)
    if policy.on_write is not None:
        await policy.on_write(request, obj, current)


async def _check_stored(request: Request, policy: KindPolicy, current: Obj) -> str:
    """The kind's check of the stored object a write replaces or deletes; returns its
    resourceVersion, the precondition of that write."""
    if policy.on_stored is not None:
        await policy.on_stored(request, current)
    return str(current["metadata"]["resourceVersion"])


async def _pinned(
    request: Request, info: KindInfo, data: Obj, name: str, namespace: str | None
) -> Obj:
    """``data`` (replacing the stored ``name``) checked against the stored object and
    conditional on its resourceVersion, unless the body names one itself."""
    current = await handlers.get_object(get_store(request), info, name, namespace)
    rv = await _check_stored(request, policy_of(info), current)
    meta = data.get("metadata")
    if meta is None or (isinstance(meta, dict) and meta.get("resourceVersion") is None):
        data = {**data, "metadata": {**(meta or {}), "resourceVersion": rv}}
    return data


async def _new_body(request: Request, policy: KindPolicy) -> Any:
    """The manifest of a create or apply, noted for the audit and checked by the kind."""
    data = await read_manifest(request, get_options(request).limits)
    note(request, name=_manifest_name(data))
    await _check_body(request, policy, data, creating=True)
    return data


async def create(request: Request, info: KindInfo, namespace: str | None) -> Response:
    data = await _new_body(request, policy_of(info))
    warnings: list[str] = []
    obj = await handlers.create(
        get_store(request), get_lifecycle(request), info, data, namespace, warnings
    )
    return _written(obj, 201, warnings)


async def apply(
    request: Request, info: KindInfo, namespace: str | None, user: Principal
) -> Response:
    policy = policy_of(info)
    data = await _new_body(request, policy)
    if policy.on_stored is not None and (name := _manifest_name(data)):
        with contextlib.suppress(NotFound):  # a new object: nothing to write over
            await get_store(request).get(info.plural, name, namespace)
            data = await _pinned(request, info, data, name, namespace)

    async def check(action: str) -> None:
        note(request, action=action)
        await check_access(request, user, action, info, namespace)

    warnings: list[str] = []
    obj, created = await handlers.apply(
        get_store(request), get_lifecycle(request), info, data, namespace, check, warnings
    )
    return _written(obj, 201 if created else 200, warnings)


async def replace(request: Request, info: KindInfo, namespace: str | None, name: str) -> Response:
    policy = policy_of(info)
    data = await read_manifest(request, get_options(request).limits)
    await _check_body(request, policy, data)
    if policy.on_stored is not None:
        data = await _pinned(request, info, data, name, namespace)
    warnings: list[str] = []
    obj = await handlers.replace(
        get_store(request), get_lifecycle(request), info, data, namespace, name, warnings
    )
    return _written(obj, 200, warnings)


async def patch(request: Request, info: KindInfo, namespace: str | None, name: str) -> Response:
    policy = policy_of(info)
    limits = get_options(request).limits
    patch_kind, doc = await read_patch(request, limits)
    expected: str | None = None
    if policy.on_stored is not None or policy.on_write is not None:
        current = await handlers.get_object(get_store(request), info, name, namespace)
        if policy.on_stored is not None:
            expected = await _check_stored(request, policy, current)
        if policy.on_write is not None:
            patched = await handlers.patched_copy(current, patch_kind, doc, limits)
            await policy.on_write(request, patched, current)
    warnings: list[str] = []
    obj = await handlers.patch(
        get_store(request),
        get_lifecycle(request),
        info,
        name,
        namespace,
        patch_kind,
        doc,
        limits,
        expected_rv=expected,
        warnings=warnings,
    )
    return _written(obj, 200, warnings)


async def delete(
    request: Request, info: KindInfo, namespace: str | None, name: str, rv: str | None
) -> Response:
    policy = policy_of(info)
    if policy.on_stored is not None:
        current = await handlers.get_object(get_store(request), info, name, namespace)
        stored_rv = await _check_stored(request, policy, current)
        rv = rv or stored_rv
    obj, finished = await handlers.delete(
        get_store(request), get_lifecycle(request), info, name, namespace, rv, policy.on_delete
    )
    return JSONResponse(obj, status_code=200 if finished else 202)
