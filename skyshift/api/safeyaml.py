"""YAML bodies without alias bombs: scan the parser's events before building anything.

``yaml.safe_load`` is safe from code execution, not from size: anchors and aliases let a body
of a few hundred bytes expand into billions of values (a 456-byte manifest held the API for
minutes at 12 GB). Manifests have no use for them, so a body is first scanned as a stream of
parser events (libyaml's C parser when available) and refused at the first anchor or alias, at
too deep a nesting, or at too many values, with the path of the offending field. Only a body
that passed is loaded, and what it loads to is then bounded by the same scan.
"""

from __future__ import annotations

from typing import Any

import yaml

from skyshift.api.errors import ApiError
from skyshift.api.limits import Limits, field_path, too_big, too_deep, too_many

Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Frame:
    """An open mapping or sequence: the key or index of the child being read."""

    __slots__ = ("index", "is_map", "key", "want_key")

    def __init__(self, is_map: bool) -> None:
        self.is_map = is_map
        self.want_key = True
        self.key: Any = None
        self.index = -1


def _child(stack: list[_Frame], event: yaml.Event) -> bool:
    """Advance the open collection past a new node; True when that node is a mapping key."""
    if not stack:
        return False
    top = stack[-1]
    if not top.is_map:
        top.index += 1
        return False
    if top.want_key:
        top.want_key = False
        top.key = event.value if isinstance(event, yaml.ScalarEvent) else "?"
        return True
    top.want_key = True
    return False


def _path(stack: list[_Frame]) -> str | None:
    return field_path([f.key if f.is_map else f.index for f in stack])


def scan(text: str, limits: Limits) -> int:
    """Check a YAML stream (400/413 naming the field); returns how many documents it holds."""
    stack: list[_Frame] = []
    try:
        return _scan(text, limits, stack)
    except yaml.YAMLError as exc:
        # libyaml >= 0.2.6 (PyYAML 6.0.3+) stops at its own nesting limit while scanning
        # ahead, before our depth check sees the events: the same refusal, named where the
        # nesting starts
        if "nesting depth" in str(exc):
            raise too_deep(limits, _path(stack)) from exc
        raise


def _scan(text: str, limits: Limits, stack: list[_Frame]) -> int:
    documents = nodes = size = 0
    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            continue
        if not isinstance(event, yaml.NodeEvent):
            if isinstance(event, yaml.CollectionEndEvent) and stack:
                stack.pop()
            continue
        _child(stack, event)
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            field = _path(stack)
            where = f" (at {field})" if field else ""
            raise ApiError(
                400,
                f"YAML anchors and aliases (&{event.anchor} / *{event.anchor}) are not "
                f"accepted{where}: write the values out",
                field=field,
            )
        nodes += 1
        if nodes > limits.max_nodes:
            raise too_many(limits, _path(stack))
        if isinstance(event, yaml.ScalarEvent):
            size += len(event.value) + 2
            if size > limits.max_bytes:
                raise too_big(limits, _path(stack))
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= limits.max_depth:
                raise too_deep(limits, _path(stack))
            stack.append(_Frame(isinstance(event, yaml.MappingStartEvent)))
            size += 2
    return documents


def load(text: str, limits: Limits) -> list[Any]:
    """The non-empty documents of a YAML stream that :func:`scan` accepted."""
    scan(text, limits)
    return [doc for doc in yaml.load_all(text, Loader=Loader) if doc is not None]
