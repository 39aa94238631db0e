"""The kinds SkyShift knows: plural names, aliases, scope, and manifest parsing.

API routes, the CLI's kind arguments and the store's key layout all come from this one table.
What the API does differently per kind is registered beside it, keyed by ``KindInfo.kind``, in
the API layer (which this layer may not import): ``skyshift.api.policies`` (who may write what,
delete refusals, extra routes, OpenAPI texts) and ``skyshift.api.rules`` (object checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from skyshift.models.base import SkyObject
from skyshift.models.cluster import Cluster
from skyshift.models.endpoints import Endpoints
from skyshift.models.filterpolicy import FilterPolicy
from skyshift.models.job import Job
from skyshift.models.link import Link
from skyshift.models.namespace import Namespace
from skyshift.models.pipeline import Pipeline
from skyshift.models.quota import Quota
from skyshift.models.role import Role
from skyshift.models.schedule import Schedule
from skyshift.models.service import Service
from skyshift.models.user import User


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    namespaced: bool
    model: type[SkyObject]
    aliases: tuple[str, ...]


def _info(model: type[SkyObject], *aliases: str) -> KindInfo:
    return KindInfo(model.KIND, model.PLURAL, model.NAMESPACED, model, aliases)


KINDS: tuple[KindInfo, ...] = (
    _info(Cluster, "cluster", "cl"),
    _info(Job, "job"),
    _info(Pipeline, "pipeline", "pl"),
    _info(Schedule, "schedule", "sched"),
    _info(Service, "service", "svc"),
    _info(Endpoints, "endpoint", "edp"),
    _info(FilterPolicy, "filterpolicy", "fp", "filterpolicys"),
    _info(Quota, "quota", "quo"),
    _info(Link, "link"),
    _info(Namespace, "namespace", "ns"),
    _info(Role, "role"),
    _info(User, "user"),
)
_BY_NAME: dict[str, KindInfo] = {}
for _k in KINDS:
    for _n in (_k.kind.lower(), _k.plural, *_k.aliases):
        _BY_NAME[_n] = _k

# Kinds reachable through the generic object routes (users have their own routes).
API_KINDS: tuple[KindInfo, ...] = tuple(k for k in KINDS if k.kind != "User")


class UnknownKind(ValueError):
    pass


def kind_info(name: str) -> KindInfo:
    """Resolve a kind from its name, plural or alias, case-insensitively."""
    info = _BY_NAME.get(name.lower())
    if info is None:
        known = ", ".join(k.plural for k in API_KINDS)
        raise UnknownKind(f"unknown kind {name!r}: expected one of {known}")
    return info


def parse_object(data: Any, default_namespace: str = "default") -> SkyObject:
    """Validate a manifest dict into its kind's model (pydantic errors name the bad field)."""
    if not isinstance(data, dict):
        raise ValueError("a manifest must be a mapping with 'kind' and 'metadata'")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise UnknownKind("manifest has no 'kind'")
    info = kind_info(kind)
    data = dict(data)
    data["kind"] = info.kind
    meta = dict(data.get("metadata") or {})
    if info.namespaced:
        meta.setdefault("namespace", default_namespace)
    elif meta.get("namespace") is not None:
        raise ValueError(f"{info.kind} is cluster-scoped: metadata.namespace must not be set")
    data["metadata"] = meta
    return info.model.model_validate(data)


def load_manifests(text: str) -> list[dict[str, Any]]:
    """Parse one or more YAML (or JSON) documents; empty documents are skipped."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    for d in docs:
        if not isinstance(d, dict):
            raise ValueError("each document must be a mapping with 'kind' and 'metadata'")
    return docs
