"""What each Quota's namespace holds now, read from etcd for a scheduling round or a status write.

A job holds quota from the round that admits it (its ``status.placement`` is written in the same
compare-and-swap as the decision) until it ends (phase Succeeded or Failed) or is removed. Only
namespaces that have a Quota are read, so a super-cluster without quotas pays nothing per round.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from skyshift.models.base import Obj, ns_name
from skyshift.models.job import TERMINAL_PHASES, ResourceRequest
from skyshift.models.quantity import Resources
from skyshift.models.quota import QuotaSpec
from skyshift.scheduler.quota import QuotaInfo, add_into, demand
from skyshift.store import ObjectStore


def per_replica_of(obj: Obj) -> Resources:
    """A stored job's per-replica request (a spec that no longer validates counts as nothing)."""
    spec = obj.get("spec") or {}
    try:
        return ResourceRequest.model_validate(spec.get("resources") or {}).to_resources()
    except ValidationError:
        return Resources()


def replicas_held(obj: Obj) -> int:
    """Replicas a stored job holds against quota: its placement, unless it has ended."""
    status = obj.get("status") or {}
    if status.get("phase") in TERMINAL_PHASES:
        return 0
    placement = status.get("placement") or {}
    return sum(n for n in placement.values() if isinstance(n, int) and n > 0)


def namespace_usage(
    jobs: list[Obj], batch: Mapping[str, tuple[Resources, int]]
) -> dict[str, float]:
    """What ``jobs`` (one namespace's) hold, in quota keys. ``batch`` gives, by job key, the
    per-replica request and replicas held of the jobs in this round (their queue entries are
    newer than their stored status)."""
    used: dict[str, float] = {}
    for obj in jobs:
        key = ns_name(obj)
        per, held = batch[key] if key in batch else (per_replica_of(obj), replicas_held(obj))
        if held > 0:
            add_into(used, demand(per, held, True))
    return used


def quota_from(obj: Obj) -> QuotaInfo | None:
    """A stored Quota as the scheduler sees it (one that no longer validates is skipped)."""
    meta = obj.get("metadata") or {}
    try:
        spec = QuotaSpec.model_validate(obj.get("spec") or {})
    except ValidationError:
        return None
    return QuotaInfo(str(meta.get("name")), str(meta.get("namespace")), dict(spec.hard),
                     cohort=spec.cohort, weight=spec.weight,
                     borrowing_limit=dict(spec.borrowingLimit))


async def quota_infos(
    store: ObjectStore, batch: Mapping[str, tuple[Resources, int]] | None = None
) -> list[QuotaInfo]:
    """Every Quota with what its namespace holds now (one job listing per such namespace)."""
    quotas = [q for obj in (await store.list("quotas")).items if (q := quota_from(obj))]
    usage: dict[str, dict[str, float]] = {}
    for ns in sorted({q.namespace for q in quotas}):
        jobs = (await store.list("jobs", ns)).items
        usage[ns] = namespace_usage(jobs, batch or {})
    for q in quotas:
        q.used = dict(usage[q.namespace])
    return quotas
