"""Bounds on what one request body may make the server build, not only on its bytes.

``max_bytes`` is checked while a body is read, but a few hundred bytes can still cost gigabytes
and minutes once decoded: YAML aliases expand exponentially, a JSON Patch ``copy`` doubles the
object per operation, and deep nesting exhausts the recursion of parsers, of pydantic and of the
merge patch (a 500 with RecursionError). So every decoded body is also walked (iteratively)
against a nesting depth, a count of values and an estimate of its serialized size, and the
patched object is bounded the same way. The errors are 400 (shape) or 413 (size) and name the
field where the limit was hit.

The same walk refuses strings (values and keys) holding a lone UTF-16 surrogate (JSON ``"\\ud800"``
or YAML ``"\\ud800"`` decode to one): Python keeps them, but they cannot be encoded as UTF-8, so
once stored every read of the object would fail (422 naming the field instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skyshift.api.errors import ApiError

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_NODES = 100_000
DEFAULT_MAX_PATCH_OPS = 1000

#: A path as a chain of ``(segment, parent)`` pairs: built in O(1) per value, joined on error.
Chain = tuple[Any, "Chain"] | None


@dataclass(frozen=True)
class Limits:
    """What one body may hold once decoded (see the module docstring)."""

    #: Bytes of a body as sent, and the estimated serialized size of what it decodes (or
    #: patches) to.
    max_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Nesting levels of objects and lists (the body itself is level 1).
    max_depth: int = DEFAULT_MAX_DEPTH
    #: Values in all (every object, list, string, number...).
    max_nodes: int = DEFAULT_MAX_NODES
    #: Operations in one JSON Patch.
    max_patch_ops: int = DEFAULT_MAX_PATCH_OPS


DEFAULT_LIMITS = Limits()


def field_path(segments: list[Any] | tuple[Any, ...]) -> str | None:
    """``spec.rules[0].actions`` from ``["spec", "rules", 0, "actions"]`` (None for the root);
    very long paths keep their start and say so."""
    out = ""
    for seg in segments:
        if isinstance(seg, int) and not isinstance(seg, bool):
            out += f"[{seg}]"
        else:
            out = f"{out}.{seg}" if out else str(seg)
        if len(out) > 256:
            return out[:256] + "..."
    return out or None


def chain_path(chain: Chain) -> str | None:
    segments: list[Any] = []
    while chain is not None:
        segments.append(chain[0])
        chain = chain[1]
    return field_path(segments[::-1])


_REACHED = " (the limit was reached at {})"


def _over(status: int, message: str, field: str | None, where: str) -> ApiError:
    """The error of a body over one of its limits, saying ``where`` (a template) when known."""
    return ApiError(status, message + (where.format(field) if field else ""), field=field)


def too_deep(limits: Limits, field: str | None, what: str = "request body") -> ApiError:
    return _over(400, f"{what} is nested more than {limits.max_depth} levels deep", field, " at {}")


def too_many(limits: Limits, field: str | None, what: str = "request body") -> ApiError:
    return _over(413, f"{what} holds more than {limits.max_nodes} values", field, _REACHED)


def too_big(limits: Limits, field: str | None, what: str = "request body") -> ApiError:
    return _over(413, f"{what} decodes to more than the limit of {limits.max_bytes} bytes",
                 field, _REACHED)


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate code point in ``text`` (None: it encodes as UTF-8)."""
    if text.isascii():
        return None
    match = _SURROGATE.search(text)
    return None if match is None else match.start()


def has_surrogate(field: str | None, point: str, what: str = "request body") -> ApiError:
    """The 422 for the lone surrogate ``point`` found at ``field``."""
    where = f" at {field}" if field else ""
    return ApiError(
        422,
        f"{what} holds a string with a lone UTF-16 surrogate (U+{ord(point):04X}){where}: "
        "text must be valid Unicode",
        field=field,
    )


def _scalar_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bool) or value is None:
        return 5
    return 8


def check_tree(value: Any, limits: Limits, what: str = "request body") -> None:
    """Raise (400/413, naming the field) when ``value`` is deeper, has more values or would
    serialize larger than ``limits`` allow, and 422 when a string or key in it holds a lone
    surrogate. Iterative: any depth is safe to walk."""
    stack: list[tuple[Any, int, Chain]] = [(value, 1, None)]
    nodes = 0
    size = 0
    while stack:
        item, depth, chain = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise too_many(limits, chain_path(chain), what)
        if isinstance(item, dict | list):
            if depth > limits.max_depth:
                raise too_deep(limits, chain_path(chain), what)
            size += 2
            if isinstance(item, dict):
                for key, child in item.items():
                    size += len(str(key)) + 4
                    if isinstance(key, str) and (at := surrogate_at(key)) is not None:
                        printable = key.encode("utf-8", "backslashreplace").decode()
                        raise has_surrogate(chain_path((printable, chain)), key[at], what)
                    stack.append((child, depth + 1, (key, chain)))
            else:
                for index, child in enumerate(item):
                    size += 1
                    stack.append((child, depth + 1, (index, chain)))
        else:
            size += _scalar_size(item)
            if isinstance(item, str) and (at := surrogate_at(item)) is not None:
                raise has_surrogate(chain_path(chain), item[at], what)
        if size > limits.max_bytes:
            raise too_big(limits, chain_path(chain), what)


def measure(value: Any, budget: int) -> int:
    """The estimated serialized size of ``value``; stops early and returns ``budget + 1`` once
    it is larger than ``budget``, so the cost of asking is bounded by the budget."""
    stack = [value]
    size = 0
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            size += 2 + sum(len(str(k)) + 4 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            size += 2 + len(item)
            stack.extend(item)
        else:
            size += _scalar_size(item)
        if size > budget:
            return budget + 1
    return size
