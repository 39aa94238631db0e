"""Preemption in the scheduler's round: nominate victims for the jobs that did not fit.

``place_batch`` calls :func:`nominate` after its decisions: each unplaced job that may preempt
(and has no nomination still in force) gets the victims :func:`choose_victims` picks, among the
jobs etcd shows holding replicas. Its Decision then carries them, the round's follow-up records
them in the job's status (``status.preempting``, in the same compare-and-swap as its pending
message) and only then signals each victim's JobWorkflow a ``preempted`` event, which deletes
the victim's replicas and puts it back in the queue. The preemptor stays queued and is placed
normally once the freed capacity shows; while its nomination stands (``NOMINATION_TTL``) it
evicts nothing more, so a slow teardown never costs a second set of victims.

A retried round may signal the same victims again: a victim that holds nothing ignores it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from temporalio.client import Client
from temporalio.service import RPCError

from skyshift.activities.quotas import per_replica_of
from skyshift.activities.store import uid_of
from skyshift.contract.jobs import PREEMPTED, ClusterEvent, QueueEntry
from skyshift.contract.names import SIG_CLUSTER, job_workflow_id
from skyshift.lifecycle.convert import parse_time
from skyshift.metrics import PREEMPTIONS
from skyshift.models.base import Obj, ns_name
from skyshift.scheduler.preempt import NEVER, Running, choose_victims
from skyshift.scheduler.quota import QuotaInfo
from skyshift.scheduler.types import ClusterInfo, Decision, FilterPolicyInfo
from skyshift.store import NotFound, ObjectStore

log = logging.getLogger(__name__)
NOMINATION_TTL = 60.0  # seconds a preemptor waits for its victims' capacity before it may again
HOLDING = ("Scheduled", "Running")


def holding(obj: Obj) -> Running | None:
    """The job as a preemption candidate when it holds replicas now, else None."""
    meta, spec, status = (
        obj.get("metadata") or {},
        obj.get("spec") or {},
        obj.get("status") or {},
    )
    placement = {
        str(c): int(n)
        for c, n in (status.get("placement") or {}).items()
        if isinstance(n, int) and n > 0
    }
    if status.get("phase") not in HOLDING or not placement or meta.get("deletionTimestamp"):
        return None
    started = parse_time(status.get("startTime") or meta.get("creationTimestamp"))
    return Running(
        ns_name(obj),
        str(meta.get("uid") or ""),
        str(meta.get("namespace")),
        int(spec.get("priority") or 0),
        started,
        per_replica_of(obj),
        placement,
    )


def running_of(objs: Sequence[Obj], skip: set[str]) -> list[Running]:
    """The jobs holding replicas now (not in ``skip``, the keys queued this round)."""
    return [r for obj in objs if (r := holding(obj)) is not None and r.key not in skip]


def wants_to_preempt(entry: QueueEntry, decision: Decision, now: float) -> bool:
    r = entry.req.request
    return (
        not decision.placed
        and r.replicas > 0
        and r.preemption != NEVER
        and entry.nominated_until <= now
    )


def nominate(
    entries: Sequence[QueueEntry],
    decisions: Sequence[Decision],
    holders: Sequence[Running],
    clusters: Sequence[ClusterInfo],
    policies: Sequence[FilterPolicyInfo],
    quotas: Sequence[QuotaInfo],
) -> None:
    """Give each unplaced job that may preempt its victims (``Decision.victims``), highest
    priority first. ``clusters`` and ``quotas`` are as the round left them; a victim is taken
    once, and a later preemptor must find room without the earlier ones' victims."""
    now = time.time()
    queued = {e.req.request.key for e in entries}
    left = [r for r in holders if r.key not in queued]
    waiting = sorted(
        (pair for pair in zip(entries, decisions, strict=True) if wants_to_preempt(*pair, now)),
        key=lambda pair: (-pair[0].req.request.priority, pair[0].req.request.created),
    )
    for entry, decision in waiting:
        victims = choose_victims(entry.req.request, left, clusters, policies, quotas)
        if not victims:
            continue
        taken = {v.key for v in victims}
        left = [r for r in left if r.key not in taken]
        decision.victims = sorted(taken)
        decision.reclaimed = sorted(
            v.key for v in victims if v.priority >= entry.req.request.priority
        )
        decision.waits_on = sorted({c for v in victims for c in v.placement})
        decision.message = f"preempting {', '.join(decision.victims)}; {decision.message}"


def still_nominated(entry: QueueEntry, decision: Decision, now: float) -> None:
    """A preemptor waiting for its victims' capacity says so (and keeps its nomination)."""
    if not decision.placed and entry.nominated and entry.nominated_until > now:
        decision.message = (
            f"waiting for preempted {', '.join(entry.nominated)} to free capacity; "
            f"{decision.message}"
        )


async def stored_nominations(store: ObjectStore, entries: Sequence[QueueEntry],
                             now: float) -> None:
    """A retried round: the attempt before may have evicted for these jobs already (their
    ``status.preempting``); they wait for that capacity instead of evicting again."""
    for entry in entries:
        r = entry.req.request
        try:
            obj = await store.get("jobs", r.key.split("/", 1)[1], r.namespace)
        except NotFound:
            continue
        victims = (obj.get("status") or {}).get("preempting") or []
        if uid_of(obj) == r.uid and victims and entry.nominated_until <= now:
            entry.nominated = [str(v) for v in victims]
            entry.nominated_until = now + NOMINATION_TTL


async def evict(
    client: Client, preemptor: str, priority: int, victims: Sequence[str],
    reclaimed: Sequence[str] = (),
) -> None:
    """Signal each victim's JobWorkflow that it is preempted by ``preemptor`` (``reclaimed``:
    those evicted because their namespace borrowed the quota the preemptor's namespace lent)."""
    for key in victims:
        why = (
            f"Preempted by {preemptor}: its namespace takes back the cohort quota this job's "
            "namespace borrowed"
            if key in reclaimed
            else f"Preempted by {preemptor}: it has priority {priority} and needs the capacity"
        )
        ns, name = key.split("/", 1)
        try:
            await client.get_workflow_handle(job_workflow_id(ns, name)).signal(
                SIG_CLUSTER, ClusterEvent("", PREEMPTED, why)
            )
        except RPCError as exc:  # ended meanwhile: its capacity frees anyway
            log.warning("cannot tell %s it is preempted by %s: %s", key, preemptor, exc)
            continue
        PREEMPTIONS.labels(namespace=ns).inc()
