"""URL layout of the API and manifest normalisation, shared by the sync and async clients.

The route scheme comes from the kind registry (plural names, namespaced or not), so the clients
never hard-code a kind and accept every alias the registry knows (``svc``, ``fp``, ``cl``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from skyshift.models import KindInfo, SkyObject, kind_info

# ``namespace=ALL_NAMESPACES`` lists or watches a namespaced kind across every namespace.
ALL_NAMESPACES = "all"


def _seg(value: str) -> str:
    return quote(value, safe="")


def resolve_kind(kind: str | type[SkyObject]) -> KindInfo:
    """A kind name, plural, alias or model class -> its registry entry."""
    if isinstance(kind, type):
        return kind_info(kind.KIND)
    return kind_info(kind)


def collection_path(info: KindInfo, namespace: str | None) -> str:
    """``/{plural}`` (cluster-scoped, or all namespaces) or ``/{namespace}/{plural}``."""
    if not info.namespaced or namespace in (None, ALL_NAMESPACES):
        return f"/{info.plural}"
    assert namespace is not None
    return f"/{_seg(namespace)}/{info.plural}"


def object_path(info: KindInfo, name: str, namespace: str | None) -> str:
    """``/{plural}/{name}`` or ``/{namespace}/{plural}/{name}``.

    An empty name is refused: ``/{plural}/`` would address the collection, so a get of ``''``
    would list every object and a delete of ``''`` would hit the wrong route.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a {info.kind} name must not be empty")
    if info.namespaced:
        if not namespace or namespace == ALL_NAMESPACES:
            raise ValueError(f"{info.kind} is namespaced: {name!r} needs a namespace")
        return f"/{_seg(namespace)}/{info.plural}/{_seg(name)}"
    return f"/{info.plural}/{_seg(name)}"


def to_manifest(obj: Mapping[str, Any] | SkyObject) -> dict[str, Any]:
    """A plain dict copy of a manifest (models are dumped without server-owned ``None`` fields)."""
    if isinstance(obj, SkyObject):
        data = obj.model_dump(mode="json", exclude_none=True)
    elif isinstance(obj, Mapping):
        data = dict(obj)
    else:
        raise TypeError(f"expected a manifest dict or a SkyObject, got {type(obj).__name__}")
    if not isinstance(data.get("metadata"), Mapping) or not data["metadata"].get("name"):
        raise ValueError("a manifest needs metadata.name")
    data["metadata"] = dict(data["metadata"])
    return data


def manifest_target(
    data: dict[str, Any], default_namespace: str
) -> tuple[KindInfo, str, str | None]:
    """Resolve ``(kind info, name, namespace)`` of a manifest, filling in the namespace."""
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ValueError("a manifest needs a 'kind'")
    info = kind_info(kind)
    data["kind"] = info.kind
    meta = data["metadata"]
    namespace: str | None = None
    if info.namespaced:
        namespace = meta.get("namespace") or default_namespace
        meta["namespace"] = namespace
    return info, str(meta["name"]), namespace


def selector_string(selector: str | Mapping[str, str] | None) -> str | None:
    """``{"app": "web"}`` -> ``"app=web"``; strings pass through."""
    if selector is None or isinstance(selector, str):
        return selector or None
    return ",".join(f"{k}={v}" for k, v in selector.items()) or None
