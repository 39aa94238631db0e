"""Kind arguments (``get svc``, ``delete filterPolicy``): every name the registry knows, plus
the few spellings the original CLI accepted that the registry does not (``edps``).
"""

from __future__ import annotations

from typing import Any

import click

from skyshift.models import API_KINDS, KindInfo, UnknownKind, kind_info

EXTRA_ALIASES = {"edps": "endpoints", "clusters": "clusters", "fps": "filterpolicies"}


def resolve_kind(name: str) -> KindInfo:
    """A kind from any of its names; :class:`UnknownKind` lists the valid ones."""
    try:
        info = kind_info(EXTRA_ALIASES.get(name.lower(), name))
    except UnknownKind:
        info = None
    if info is None or info not in API_KINDS:
        known = ", ".join(k.plural for k in API_KINDS)
        raise UnknownKind(f"unknown kind {name!r}: expected one of {known}")
    return info


class KindType(click.ParamType):  # type: ignore[type-arg]
    """A click parameter resolving to :class:`KindInfo` (plus ``extra`` kinds, e.g. users)."""

    name = "KIND"

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.extra = {n: kind_info(k) for k in extra for n in _names(kind_info(k))}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, KindInfo):
            return value
        if (info := self.extra.get(str(value).lower())) is not None:
            return info
        try:
            return resolve_kind(str(value))
        except UnknownKind as exc:
            self.fail(str(exc), param, ctx)


def _names(info: KindInfo) -> tuple[str, ...]:
    return (info.kind.lower(), info.plural, *info.aliases)


#: get, describe and delete also take ``user``/``users`` (which have their own API routes).
KIND = KindType(extra=("users",))


class ObjectNameType(click.ParamType):  # type: ignore[type-arg]
    """An object name: never empty (``get cluster ''`` listed every cluster, since an empty
    name addresses the collection)."""

    name = "NAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if not text.strip():
            self.fail("a name must not be empty (leave NAME out to list them all)", param, ctx)
        return text


NAME = ObjectNameType()
