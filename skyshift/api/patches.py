"""PATCH documents applied with bounded work: JSON Patch (RFC 6902) and merge patch (RFC 7386).

A patch body is small but its result need not be: each JSON Patch ``copy`` may double the
object (3.2 KB of copies held the API for 100 s at 8 GB). So a JSON Patch holds at most
``max_patch_ops`` operations and is applied one operation at a time; a ``copy`` is measured
before it is made and refused once all copies together would grow the object past
``max_bytes`` (the only operation whose growth is not bounded by the body itself); the result
is measured once more at the end (an object the server itself let grow past the limit, e.g. by
its status, may stay that large but not grow). Removals do not give copies more room, or
remove-and-copy cycles would cost unbounded CPU. The routes run this in a worker thread.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import jsonpatch
import jsonpointer

from skyshift.api.errors import ApiError
from skyshift.api.limits import DEFAULT_LIMITS, Limits, check_tree, measure


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON Merge Patch (recursion is bounded by the patch's checked depth)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _op_field(index: int, op: Any, key: str) -> str:
    return f"[{index}].{key}" if isinstance(op, dict) and key in op else f"[{index}]"


def json_patch(current: dict[str, Any], ops: Any, limits: Limits) -> Any:
    """Apply the operations of ``ops`` in order to a copy of ``current``."""
    if not isinstance(ops, list):
        raise ApiError(400, "a JSON Patch body must be a list of operations")
    if len(ops) > limits.max_patch_ops:
        raise ApiError(
            400,
            f"a JSON Patch may hold at most {limits.max_patch_ops} operations; this one has "
            f"{len(ops)}: split it",
            field=f"[{limits.max_patch_ops}]",
        )
    doc: Any = copy.deepcopy(current)
    room = limits.max_bytes - measure(doc, limits.max_bytes)
    for index, op in enumerate(ops):
        if isinstance(op, dict) and op.get("op") == "copy":
            pointer = op.get("from")
            if not isinstance(pointer, str):
                raise ApiError(
                    422, f"JSON Patch operation {index}: 'from' must be a JSON pointer string",
                    field=_op_field(index, op, "from"),
                )
            try:
                source = jsonpointer.resolve_pointer(doc, pointer)
            except (jsonpointer.JsonPointerException, TypeError, AttributeError) as exc:
                raise ApiError(
                    422,
                    f"JSON Patch operation {index} cannot be applied: {exc}",
                    field=_op_field(index, op, "from"),
                ) from exc
            room -= measure(source, max(room, 0))
            if room < 0:
                raise ApiError(
                    413,
                    f"JSON Patch operation {index} (copy) would make the object larger than "
                    f"the limit of {limits.max_bytes} bytes",
                    field=_op_field(index, op, "from"),
                )
        doc = _apply_one(doc, index, op)
    return doc


def _apply_one(doc: Any, index: int, op: Any) -> Any:
    where = f"JSON Patch operation {index}"
    field = _op_field(index, op, "path")
    try:
        return jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise ApiError(
            422, f"{where}: test failed: {exc}", reason="PatchTestFailed", field=field
        ) from exc
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise ApiError(422, f"{where} cannot be applied: {exc}", field=field) from exc
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise ApiError(422, f"{where} is malformed: {exc!r}", field=f"[{index}]") from exc


def apply_patch(
    current: dict[str, Any], kind: str, doc: Any, limits: Limits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """``current`` with a JSON Patch or merge patch applied (``current`` itself is unchanged):
    422 when the patch cannot apply, 413 when the result would be larger than ``max_bytes``
    (or than ``current``, for an object the server itself let grow past that)."""
    size = measure(current, 64 * limits.max_bytes)
    if size > limits.max_bytes:
        limits = dataclasses.replace(limits, max_bytes=size)
    if kind == "merge-patch":
        result = merge_patch(current, doc)
    else:
        result = json_patch(current, doc, limits)
    if not isinstance(result, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    check_tree(result, limits, "the patched object")
    return result
