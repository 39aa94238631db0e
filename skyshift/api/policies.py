"""How the API treats each kind beyond what every kind gets: one :class:`KindPolicy` per kind.

The generic routes (:mod:`skyshift.api.routes`) read the policy of the kind they serve and never
compare kind names: who may write what (a Role grants no more than its writer holds, a Pipeline
or Schedule creates nothing its creator may not), what a write checks on the stored object (a
Role replaced or deleted), what a delete refuses (a namespace that holds objects), the routes a
kind has besides the object routes, and its OpenAPI texts. The pure object rules (no request)
are in :mod:`skyshift.api.rules`. Kinds without an entry in :data:`POLICIES` get the defaults.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request

from skyshift.api import jobs, schedules
from skyshift.api.deps import check_role_grants, check_role_replace, check_spawns, stamp_owner
from skyshift.api.errors import ApiError
from skyshift.api.handlers import DEFAULT_NAMESPACE
from skyshift.api.rules import spawned
from skyshift.models.registry import API_KINDS, KindInfo, kind_info
from skyshift.store import ObjectStore

Obj = dict[str, Any]
#: ``(request, body, current)``: checks a body about to be written; ``current`` is the stored
#: object when the body is a patched copy of it, else None.
BodyCheck = Callable[[Request, Obj, Obj | None], Awaitable[None]]

DELETE_DOC = (
    "Objects with a lifecycle get `deletionTimestamp` and phase Deleting (202); their "
    "workflow tears them down and removes them. Others are removed at once (200)."
)


@dataclass(frozen=True)
class KindPolicy:
    #: the OpenAPI description of the kind's tag
    doc: str = ""
    #: the body of a create (or of an apply that may create)
    on_create: BodyCheck | None = None
    #: every body written: create, apply, replace and the patched copy of a patch
    on_write: BodyCheck | None = None
    #: ``(request, stored)``: a stored object about to be replaced, patched or deleted; such
    #: writes are then conditional on the version checked (so the object checked is the one
    #: written over)
    on_stored: Callable[[Request, Obj], Awaitable[None]] | None = None
    #: ``(store, stored)``: refuses a delete (see :func:`skyshift.api.handlers.delete`)
    on_delete: Callable[[ObjectStore, Obj], Awaitable[None]] | None = None
    #: the OpenAPI description of the DELETE route
    delete_doc: str = DELETE_DOC
    #: routes besides the object routes (they are tried before the namespaced object routes)
    routers: tuple[APIRouter, ...] = ()


PIPELINE = kind_info("pipelines")
SCHEDULE = kind_info("schedules")


async def _role_write(request: Request, obj: Obj, current: Obj | None) -> None:
    """Nobody writes a role granting more than they hold."""
    await check_role_grants(request, obj)


async def _pipeline_create(request: Request, obj: Obj, current: Obj | None) -> None:
    """A pipeline's steps never change after its create: only then can it spawn more."""
    await check_spawns(request, spawned(PIPELINE, obj))


async def _schedule_write(request: Request, obj: Obj, current: Obj | None) -> None:
    """Every write can change what a schedule creates; its runs act for its owner."""
    await check_spawns(request, spawned(SCHEDULE, obj))
    stamp_owner(request, obj, current)


async def _namespace_contents(store: ObjectStore, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for info in API_KINDS:
        if not info.namespaced:
            continue
        result = await store.list(info.plural, namespace)
        if result.items:
            counts[info.plural] = len(result.items)
    return counts


async def _namespace_delete(store: ObjectStore, current: Obj) -> None:
    name = current["metadata"]["name"]
    if name == DEFAULT_NAMESPACE:
        raise ApiError(403, "namespace default cannot be deleted")
    counts = await _namespace_contents(store, name)
    if counts:
        total = sum(counts.values())
        listing = ", ".join(f"{n} {p}" for p, n in sorted(counts.items()))
        raise ApiError(
            409,
            f"namespace {name} still holds {total} objects ({listing}): delete them first",
            details=[{"field": p, "message": f"{n} objects"} for p, n in counts.items()],
        )


POLICIES: dict[str, KindPolicy] = {
    "Cluster": KindPolicy(
        doc="Clusters SkyShift places work on (cluster-scoped; has a lifecycle)."
    ),
    "Job": KindPolicy(
        doc="Containers to run somewhere in the super-cluster (namespaced; has a lifecycle).",
        routers=(jobs.router,),
    ),
    "Pipeline": KindPolicy(
        doc="DAGs of job templates run once, step by step (namespaced; has a lifecycle).",
        on_create=_pipeline_create,
    ),
    "Schedule": KindPolicy(
        doc="Jobs or Pipelines created on a cron or an interval, on Temporal Schedules "
        "(namespaced; has a lifecycle; trigger and backfill).",
        on_write=_schedule_write,
        routers=(schedules.router,),
    ),
    "Service": KindPolicy(doc="Stable addresses for job replicas (namespaced)."),
    "Endpoints": KindPolicy(doc="Per-cluster endpoints of a service (namespaced)."),
    "FilterPolicy": KindPolicy(doc="Keep a namespace's jobs on or off clusters (namespaced)."),
    "Link": KindPolicy(doc="Network links between clusters (cluster-scoped)."),
    "Namespace": KindPolicy(
        doc="Isolation units; `default` always exists (cluster-scoped).",
        on_delete=_namespace_delete,
        delete_doc="Refused for `default` (403) and for non-empty namespaces (409).",
    ),
    "Role": KindPolicy(
        doc="Who may do what where (cluster-scoped).",
        on_write=_role_write,
        on_stored=check_role_replace,
    ),
}


def policy_of(info: KindInfo) -> KindPolicy:
    return POLICIES.get(info.kind) or KindPolicy(doc=info.kind)
