"""Objects that name clusters: refuse names of clusters that do not exist where the object
cannot work without them, and warn where the name is only a filter.

* a Link (``spec.source_cluster``, ``spec.target_cluster``) and Endpoints
  (``spec.primary_cluster``, the keys of ``spec.endpoints``) naming a missing cluster are refused
  with 400 naming the field. On update only names the object did not already hold are checked,
  so a Link whose cluster went away can still be relabelled or fixed;
* a FilterPolicy (``spec.clusterFilter.include`` / ``exclude``) may name clusters that do not
  exist yet (a policy can be written before its clusters), so it is accepted, and the response
  carries one ``Warning: 299 - "..."`` header per missing cluster, as Kubernetes does, saying
  what the policy does meanwhile (with no included cluster existing, its jobs all wait).

The check reads etcd before the write; a cluster deleted in between is not caught (nothing
spans two keys), as in Kubernetes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from skyshift.api.errors import ApiError
from skyshift.store import ObjectStore
from skyshift.store.errors import NotFound

CLUSTERS = "clusters"
#: Kinds whose cluster references must exist / only draw a warning.
REQUIRED = frozenset({"Link", "Endpoints"})
ADVISORY = frozenset({"FilterPolicy"})
MAX_WARNINGS = 10
_GETS = 16  # up to this many names are read one by one; more: one list of all clusters


def applies(kind: str) -> bool:
    return kind in REQUIRED or kind in ADVISORY


def _spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def cluster_refs(kind: str, obj: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(field, cluster name)`` of every cluster ``obj`` names."""
    spec = _spec(obj)
    refs: list[tuple[str, Any]] = []
    if kind == "Link":
        refs = [(f"spec.{key}", spec.get(key)) for key in ("source_cluster", "target_cluster")]
    elif kind == "Endpoints":
        refs = [("spec.primary_cluster", spec.get("primary_cluster"))]
        endpoints = spec.get("endpoints")
        if isinstance(endpoints, dict):
            refs += [(f"spec.endpoints.{name}", name) for name in endpoints]
    elif kind == "FilterPolicy":
        filters = spec.get("clusterFilter")
        filters = filters if isinstance(filters, dict) else {}
        for key in ("include", "exclude"):
            names = filters.get(key)
            if isinstance(names, list):
                refs += [(f"spec.clusterFilter.{key}[{i}]", n) for i, n in enumerate(names)]
    return [(field, name) for field, name in refs if isinstance(name, str) and name]


async def missing_clusters(store: ObjectStore, names: set[str]) -> set[str]:
    if not names:
        return set()
    if len(names) > _GETS:
        existing = {str(c["metadata"]["name"]) for c in (await store.list(CLUSTERS)).items}
        return names - existing

    async def absent(name: str) -> bool:
        try:
            await store.get(CLUSTERS, name)
        except NotFound:
            return True
        return False

    ordered = sorted(names)
    found = await asyncio.gather(*(absent(n) for n in ordered))
    return {name for name, gone in zip(ordered, found, strict=True) if gone}


async def check(
    store: ObjectStore, kind: str, obj: dict[str, Any], previous: dict[str, Any] | None = None
) -> list[str]:
    """400 naming the field of the first missing cluster of a Link or Endpoints (``previous``:
    the stored object an update replaces); the warnings of a FilterPolicy's missing ones."""
    if not applies(kind):
        return []
    refs = cluster_refs(kind, obj)
    if kind in REQUIRED:
        held = {name for _, name in cluster_refs(kind, previous)}
        refs = [(field, name) for field, name in refs if name not in held]
    missing = await missing_clusters(store, {name for _, name in refs})
    dangling = [(field, name) for field, name in refs if name in missing]
    if not dangling:
        return []
    if kind in REQUIRED:
        field, name = dangling[0]
        others = "".join(f"; {f}: {n}" for f, n in dangling[1:4])
        raise ApiError(
            400,
            f"{field}: cluster {name!r} does not exist{others} (create the cluster first)",
            field=field,
            details=[{"field": f, "message": f"cluster {n!r} does not exist"} for f, n in dangling],
        )
    return filter_warnings(obj, dangling)


def filter_warnings(obj: dict[str, Any], dangling: Sequence[tuple[str, str]]) -> list[str]:
    """What a FilterPolicy naming missing clusters really does: an include list only allows the
    clusters it names, so a missing one takes nothing away from the others but, when none of
    them exists, every job the policy selects waits (Pending) until one is created."""
    included = {n for f, n in cluster_refs("FilterPolicy", obj) if ".include[" in f}
    missing = {n for _, n in dangling}
    none_left = bool(included) and included <= missing
    out = []
    for field, name in dangling:
        head = f"{field}: cluster {name!r} does not exist (yet)"
        if ".exclude[" in field:
            out.append(f"{head}; excluding it has no effect until it does")
        elif none_left:
            out.append(f"{head}; no cluster this policy includes exists, so every job it "
                       "selects stays Pending until one is created")
        else:
            out.append(f"{head}; jobs this policy selects go only to the included clusters "
                       "that exist until it does")
    return out


def header_values(warnings: Sequence[str]) -> list[str]:
    """``Warning`` header values (RFC 7234 code 299), printable ASCII only, at most
    :data:`MAX_WARNINGS` (then one saying how many more)."""
    shown = list(warnings[:MAX_WARNINGS])
    if len(warnings) > MAX_WARNINGS:
        shown.append(f"and {len(warnings) - MAX_WARNINGS} more such warnings")
    out = []
    for text in shown:
        clean = "".join(ch if " " <= ch <= "~" else "?" for ch in text[:300])
        clean = clean.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'299 - "{clean}"')
    return out
