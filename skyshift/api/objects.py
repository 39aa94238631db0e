"""What the server does to an object on create, replace and patch (pure, no I/O).

The rules follow Kubernetes: the server owns ``uid``, ``creationTimestamp``, ``generation``,
``deletionTimestamp`` and ``resourceVersion``; controllers own ``status`` (clients cannot set it
through these routes, on create it starts from the kind's defaults); ``generation`` goes up only
when the validated ``spec`` changes, which is what tells the lifecycle workflow to act.
Kept apart from the routes so the rules are unit-testable without a store.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from pydantic import ValidationError

from skyshift.api import patches
from skyshift.api.errors import ApiError, from_validation
from skyshift.api.limits import DEFAULT_LIMITS, Limits
from skyshift.api.patches import merge_patch as merge_patch  # re-exported
from skyshift.api.rules import rules_of
from skyshift.models.base import API_VERSION
from skyshift.models.meta import now_iso
from skyshift.models.registry import KindInfo, UnknownKind, kind_info, parse_object

SERVER_OWNED = ("uid", "creationTimestamp", "generation", "deletionTimestamp")


def _meta(data: dict[str, Any]) -> dict[str, Any]:
    meta = data.get("metadata")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ApiError(422, "metadata must be an object", field="metadata")
    return dict(meta)


def check_identity(
    info: KindInfo, data: dict[str, Any], namespace: str | None, name: str | None = None
) -> dict[str, Any]:
    """Fill kind, namespace (and name) from the URL; 400 naming the field when they disagree."""
    out = dict(data)
    kind = out.get("kind")
    if kind is not None:
        try:
            same = isinstance(kind, str) and kind_info(kind).kind == info.kind
        except UnknownKind:
            same = False
        if not same:
            raise ApiError(
                400, f"kind {kind!r} does not match the URL's kind {info.kind}", field="kind"
            )
    out["kind"] = info.kind
    out["apiVersion"] = API_VERSION
    meta = _meta(out)
    if info.namespaced:
        given = meta.get("namespace")
        if given is not None and given != namespace:
            raise ApiError(
                400,
                f"metadata.namespace {given!r} does not match the namespace in the URL "
                f"{namespace!r}",
                field="metadata.namespace",
            )
        meta["namespace"] = namespace
    elif meta.get("namespace") is not None:
        raise ApiError(
            400,
            f"{info.kind} is cluster-scoped: metadata.namespace must not be set",
            field="metadata.namespace",
        )
    else:
        meta.pop("namespace", None)
    if name is not None:
        given_name = meta.get("name")
        if given_name is not None and given_name != name:
            raise ApiError(
                400,
                f"metadata.name {given_name!r} does not match the name in the URL {name!r}",
                field="metadata.name",
            )
        meta["name"] = name
    out["metadata"] = meta
    return out


def validate(info: KindInfo, data: dict[str, Any]) -> dict[str, Any]:
    """The object as its kind's model dumps it (defaults filled); 422 naming the bad field."""
    try:
        obj = parse_object(data, default_namespace=_meta(data).get("namespace") or "default")
    except ValidationError as exc:
        raise from_validation(exc, info.kind) from exc
    except ValueError as exc:
        raise ApiError(422, f"invalid {info.kind}: {exc}") from exc
    out = obj.to_dict()
    if (check := rules_of(info).check) is not None:
        check(out)  # what this server allows beyond what the model accepts (see rules)
    return out


def prepare_create(info: KindInfo, data: dict[str, Any]) -> dict[str, Any]:
    """A new object: server-owned fields set, status reset to the kind's defaults."""
    data = dict(data)
    data.pop("status", None)
    meta = _meta(data)
    meta.pop("resourceVersion", None)
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_iso(), generation=1)
    meta["deletionTimestamp"] = None
    data["metadata"] = meta
    obj = validate(info, data)
    if (check_new := rules_of(info).check_new) is not None:
        check_new(obj)
    return obj


def merge_update(
    info: KindInfo, current: dict[str, Any], data: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Replace ``current`` by ``data`` keeping server-owned fields and status.

    Returns the validated object and whether its spec changed (``generation`` already bumped).
    ``data`` must already carry the right kind, name and namespace (see :func:`check_identity`).
    """
    cur_meta = current.get("metadata") or {}
    meta = _meta(data)
    uid = meta.get("uid")
    if uid is not None and uid != cur_meta.get("uid"):
        raise ApiError(
            409,
            f"metadata.uid {uid!r} does not match the stored object's uid (it was recreated)",
            field="metadata.uid",
            resource_version=cur_meta.get("resourceVersion"),
        )
    for key in SERVER_OWNED:
        meta[key] = cur_meta.get(key)
    meta["resourceVersion"] = cur_meta.get("resourceVersion")
    data = {**data, "metadata": meta, "status": current.get("status")}
    obj = validate(info, data)
    old_spec = validate(info, current)["spec"] if current.get("spec") is not None else None
    changed = obj.get("spec") != old_spec
    if changed:
        if cur_meta.get("deletionTimestamp"):
            raise ApiError(
                409,
                f"{info.kind} {cur_meta.get('name')} is being deleted: its spec cannot change",
                reason="Deleting",
                field="spec",
                resource_version=cur_meta.get("resourceVersion"),
            )
        check_change = rules_of(info).check_spec_change
        if check_change is not None and isinstance(old_spec, dict):
            check_change(old_spec, obj["spec"])
        obj["metadata"]["generation"] = int(cur_meta.get("generation") or 0) + 1
    return obj, changed


def apply_patch(
    current: dict[str, Any], kind: str, doc: Any, limits: Limits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """Apply a JSON Patch or a merge patch to a copy of ``current`` (422 when it cannot apply,
    413 when the result is too large; see :mod:`skyshift.api.patches`)."""
    return patches.apply_patch(current, kind, doc, limits)


def check_patched_identity(current: dict[str, Any], patched: dict[str, Any]) -> None:
    """A patch may not rename, move or re-kind an object; a resourceVersion is a precondition."""
    cur_meta = current.get("metadata") or {}
    meta = patched.get("metadata")
    if not isinstance(meta, dict):
        raise ApiError(422, "the patch removed metadata", field="metadata")
    if patched.get("kind") != current.get("kind"):
        raise ApiError(422, "kind is immutable", field="kind")
    for key in ("name", "namespace", "uid"):
        if meta.get(key) != cur_meta.get(key):
            raise ApiError(422, f"metadata.{key} is immutable", field=f"metadata.{key}")
    rv = meta.get("resourceVersion")
    cur_rv = cur_meta.get("resourceVersion")
    if rv is not None and str(rv) != str(cur_rv):
        raise ApiError(
            409,
            f"resourceVersion {rv} is stale: the object is at {cur_rv}",
            resource_version=None if cur_rv is None else str(cur_rv),
        )


def mark_deleting(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with ``deletionTimestamp`` set and phase ``Deleting`` (finalizer semantics)."""
    out = copy.deepcopy(obj)
    out["metadata"]["deletionTimestamp"] = out["metadata"].get("deletionTimestamp") or now_iso()
    status = out.get("status")
    if isinstance(status, dict) and "phase" in status:
        status["phase"] = "Deleting"
    return out
