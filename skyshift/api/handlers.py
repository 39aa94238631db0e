"""The object operations behind every kind's routes: create, replace, patch, delete.

Each function does the reads and the single conditional etcd write of one request, then calls
the lifecycle hook. A request that fails (validation, precondition, conflict) returns before
the write, so a failed request never changes the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from skyshift.api import objects, references
from skyshift.api.errors import ApiError
from skyshift.api.lifecycle import Lifecycle, notify
from skyshift.api.limits import DEFAULT_LIMITS, Limits
from skyshift.models.registry import KindInfo, kind_info
from skyshift.store import ObjectStore
from skyshift.store.errors import AlreadyExists, NotFound

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"


async def ensure_default_namespace(store: ObjectStore) -> None:
    """Create namespace ``default`` if it is missing (several replicas may race: fine)."""
    info = kind_info("namespaces")
    obj = objects.prepare_create(
        info, {"kind": "Namespace", "metadata": {"name": DEFAULT_NAMESPACE}}
    )
    try:
        await store.create(info.plural, obj)
        log.info("created namespace %s", DEFAULT_NAMESPACE)
    except AlreadyExists:
        pass


async def require_namespace(store: ObjectStore, namespace: str) -> None:
    """404 unless the namespace exists (``default`` is re-created if someone lost it)."""
    try:
        await store.get("namespaces", namespace)
    except NotFound:
        if namespace == DEFAULT_NAMESPACE:
            await ensure_default_namespace(store)
            return
        raise ApiError(
            404, f"namespace {namespace} not found", field="metadata.namespace"
        ) from None


async def get_object(
    store: ObjectStore, info: KindInfo, name: str, namespace: str | None
) -> dict[str, Any]:
    try:
        return await store.get(info.plural, name, namespace)
    except NotFound:
        raise _not_found(info, name, namespace) from None


def _not_found(info: KindInfo, name: str, namespace: str | None) -> ApiError:
    where = f" in namespace {namespace}" if namespace else ""
    return ApiError(404, f"{info.kind} {name} not found{where}")


def _warn(warnings: list[str] | None, new: list[str]) -> None:
    if warnings is not None:
        warnings.extend(new)


def _hooks(info: KindInfo, lifecycle: Lifecycle | None) -> Lifecycle | None:
    """The lifecycle to notify about objects of ``info``, if any."""
    return lifecycle if lifecycle is not None and info.model.HAS_LIFECYCLE else None


def _stale(rv: str, current: dict[str, Any]) -> ApiError:
    cur = str(current["metadata"].get("resourceVersion"))
    return ApiError(
        409,
        f"resourceVersion {rv} is stale: the object is at {cur}; read it again and retry",
        resource_version=cur,
    )


async def create(
    store: ObjectStore,
    lifecycle: Lifecycle | None,
    info: KindInfo,
    data: dict[str, Any],
    namespace: str | None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """``warnings``: gets what the response should warn about (see :mod:`.references`)."""
    data = objects.check_identity(info, data, namespace)
    obj = objects.prepare_create(info, data)
    if info.namespaced:
        assert namespace is not None
        await require_namespace(store, namespace)
    _warn(warnings, await references.check(store, info.kind, obj))
    try:
        created = await store.create(info.plural, obj)
    except AlreadyExists:
        where = f" in namespace {namespace}" if namespace else ""
        raise ApiError(
            409,
            f"{info.kind} {obj['metadata']['name']} already exists{where}",
            reason="AlreadyExists",
        ) from None
    if (hooks := _hooks(info, lifecycle)) is not None:
        await notify(hooks.created, created)
    return created


def _named(
    info: KindInfo, data: dict[str, Any], namespace: str | None, name: str | None = None,
) -> tuple[dict[str, Any], str]:
    """The body checked against the URL (:func:`objects.check_identity`), and the name it must
    give for a write that may replace an object."""
    data = objects.check_identity(info, data, namespace, name)
    named = data["metadata"].get("name")
    if not isinstance(named, str) or not named:
        raise ApiError(422, "metadata.name is required", field="metadata.name")
    return data, named


async def replace(
    store: ObjectStore,
    lifecycle: Lifecycle | None,
    info: KindInfo,
    data: dict[str, Any],
    namespace: str | None,
    name: str | None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """PUT: replace spec/labels/annotations; metadata.resourceVersion, when given, must match."""
    data, name = _named(info, data, namespace, name)
    rv = data["metadata"].get("resourceVersion")
    changed = False
    if references.applies(info.kind):
        # What the new object names is checked before the write (it reads etcd, which the
        # compare-and-swap below cannot): validate it against the object as it is now.
        previous = await get_object(store, info, name, namespace)
        new, _ = objects.merge_update(info, previous, data)
        _warn(warnings, await references.check(store, info.kind, new, previous))

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        # Runs on every compare-and-swap round: with a client resourceVersion a concurrent
        # write makes the next round fail as stale (409); without one (unconditional
        # replace, as in Kubernetes) the body is merged onto the fresh object again.
        nonlocal changed
        if rv is not None and str(rv) != str(current["metadata"].get("resourceVersion")):
            raise _stale(str(rv), current)
        new, changed = objects.merge_update(info, current, data)
        return new

    try:
        updated = await store.guaranteed_update(info.plural, name, namespace, mutate)
    except NotFound:
        raise _not_found(info, name, namespace) from None
    if changed and (hooks := _hooks(info, lifecycle)) is not None:
        await notify(hooks.spec_changed, updated)
    return updated


async def apply(
    store: ObjectStore,
    lifecycle: Lifecycle | None,
    info: KindInfo,
    data: dict[str, Any],
    namespace: str | None,
    check: Callable[[str], Awaitable[None]] | None = None,
    warnings: list[str] | None = None,
) -> tuple[dict[str, Any], bool]:
    """PUT on the collection: create the named object, or replace it if it exists.

    ``check(action)`` authorizes what it turns out to be: ``create`` or ``update``.
    """
    data, name = _named(info, data, namespace)
    try:
        await store.get(info.plural, name, namespace)
    except NotFound:
        if check is not None:
            await check("create")
        return await create(store, lifecycle, info, data, namespace, warnings), True
    if check is not None:
        await check("update")
    return await replace(store, lifecycle, info, data, namespace, name, warnings), False


async def patch(
    store: ObjectStore,
    lifecycle: Lifecycle | None,
    info: KindInfo,
    name: str,
    namespace: str | None,
    patch_kind: str,
    doc: Any,
    limits: Limits = DEFAULT_LIMITS,
    *,
    expected_rv: str | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """``expected_rv``: the resourceVersion the caller checked the object at (409 if not)."""
    current = await get_object(store, info, name, namespace)
    if expected_rv is not None and expected_rv != str(current["metadata"]["resourceVersion"]):
        raise _stale(expected_rv, current)
    patched = await patched_copy(current, patch_kind, doc, limits)
    objects.check_patched_identity(current, patched)
    new, changed = objects.merge_update(info, current, patched)
    _warn(warnings, await references.check(store, info.kind, new, current))
    updated = await store.update(
        info.plural, new, expected_rv=str(current["metadata"]["resourceVersion"])
    )
    if changed and (hooks := _hooks(info, lifecycle)) is not None:
        await notify(hooks.spec_changed, updated)
    return updated


async def patched_copy(
    current: dict[str, Any], patch_kind: str, doc: Any, limits: Limits
) -> dict[str, Any]:
    """``current`` patched, computed in a worker thread (bounded, but CPU the loop owes others)."""
    return await asyncio.to_thread(objects.apply_patch, current, patch_kind, doc, limits)


async def delete(
    store: ObjectStore,
    lifecycle: Lifecycle | None,
    info: KindInfo,
    name: str,
    namespace: str | None,
    resource_version: str | None,
    check: Callable[[ObjectStore, dict[str, Any]], Awaitable[None]] | None = None,
) -> tuple[dict[str, Any], bool]:
    """Delete, or start deleting; returns ``(object, finished)``.

    Kinds with a lifecycle (when one is configured) get ``deletionTimestamp`` and phase
    ``Deleting``; their workflow tears down and removes the object. Others go at once.
    ``check(store, current)``: the kind's own refusal (e.g. a namespace that holds objects);
    the removal is then conditional on the version it checked.
    """
    current = await get_object(store, info, name, namespace)
    if resource_version and resource_version != str(current["metadata"].get("resourceVersion")):
        raise _stale(resource_version, current)
    if check is not None:
        await check(store, current)
    if (hooks := _hooks(info, lifecycle)) is not None:
        marked = current
        if not current["metadata"].get("deletionTimestamp"):
            if resource_version:
                marked = await store.update(
                    info.plural, objects.mark_deleting(current), expected_rv=resource_version
                )
            else:
                # No precondition: a status write by the workflow between the read and this
                # write is no reason to refuse the DELETE (a 409 the user could only retry).
                marked = await store.guaranteed_update(info.plural, name, namespace, _marked)
        # Re-notify on a repeated DELETE too: the signal is idempotent and may have been lost.
        await notify(hooks.deleting, marked)
        return marked, False
    # A check above read the object it judged; without a precondition (or a check) a
    # concurrent write does not block the removal.
    expected = (
        str(current["metadata"]["resourceVersion"])
        if (resource_version or check is not None)
        else None
    )
    deleted = await store.delete(info.plural, name, namespace, expected_rv=expected)
    return deleted, True


def _marked(obj: dict[str, Any]) -> dict[str, Any] | None:
    """``guaranteed_update`` mutation of a DELETE: mark once (None when already marked)."""
    return None if obj["metadata"].get("deletionTimestamp") else objects.mark_deleting(obj)
