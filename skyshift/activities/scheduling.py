"""Scheduling activities: enqueue at the scheduler, and place a whole batch of jobs at once.

``place_batch`` is the one activity per scheduler round, however many jobs are queued: it reads
the clusters' allocatable capacity from etcd, subtracts the scheduler's outstanding reservations
(placements the clusters have not reported yet), runs the pure ``schedule_batch``, and then does
each job's follow-up itself (writes status Scheduled or the pending reasons, signals the job its
placement), so no per-job workflow task or activity is spent in the scheduler.

Signal delivery failures are reported back per job ("undelivered": keep it queued, release the
reservation; "gone": the job no longer exists), so an activity retry is never needed for them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from skyshift import failpoints
from skyshift.activities.clusters import heartbeating
from skyshift.activities.holders import Holders
from skyshift.activities.preemption import (
    NOMINATION_TTL,
    evict,
    nominate,
    still_nominated,
    stored_nominations,
    wants_to_preempt,
)
from skyshift.activities.quotas import quota_infos
from skyshift.activities.store import uid_of, update_status
from skyshift.activities.trust import check_job_request, check_names, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    DequeueRequest,
    EnqueueRequest,
    PlaceBatchInput,
    PlaceBatchResult,
    Placement,
    PlaceOutcome,
    QueueEntry,
    Reservation,
)
from skyshift.contract.names import (
    SCHEDULER_ID,
    SIG_DEQUEUE,
    SIG_SCALE,
    cluster_workflow_id,
)
from skyshift.contract.provision import ScaleRequest, expected_seconds, min_nodes
from skyshift.lifecycle.convert import nodes_from_status, queue_from_status
from skyshift.lifecycle.enqueue import enqueue, tell_placed
from skyshift.metrics import PLACEMENT_LATENCY
from skyshift.models.base import Obj
from skyshift.models.job import placement_labels
from skyshift.models.quantity import Resources
from skyshift.scheduler import schedule_batch
from skyshift.scheduler.capacity import queue_charge
from skyshift.scheduler.growth import Growable, grow_for
from skyshift.scheduler.types import ClusterInfo, Decision, FilterPolicyInfo, NodeInfo, QueueInfo
from skyshift.store import NotFound, ObjectStore

log = logging.getLogger(__name__)
FOLLOW_UP_CONCURRENCY = 64


def subtract_reservations(
    nodes: list[NodeInfo], held: list[Reservation], queue: QueueInfo | None = None
) -> tuple[list[NodeInfo], QueueInfo | None]:
    """Free capacity per node (and the batch queue's room) once ``held`` reservations are
    taken: best fit per replica, as the scheduler's ledger does; a replica no node has free
    waits in the queue when there is one (placed there, or the nodes filled up since), else it
    is taken from the emptiest node."""
    free = {n.name: n.free for n in nodes}
    room, jobs = (queue.room, queue.jobs) if queue is not None else (Resources(), 0)
    for r in held:
        for _ in range(r.count):
            fits = [name for name, f in free.items() if r.per_replica.fits_in(f)]
            if fits:
                name = min(fits, key=lambda n: (free[n].cpus, free[n].memory, n))
            elif queue is not None:
                room, jobs = room - queue_charge(r.per_replica), jobs + 1
                continue
            elif free:
                name = max(free, key=lambda n: (free[n].cpus, free[n].memory, n))
            else:
                break
            free[name] = free[name] - r.per_replica
    out = [NodeInfo(n.name, _clamp(free[n.name]), n.capacity) for n in nodes]
    return out, (QueueInfo(_clamp(room), jobs) if queue is not None else None)


def _clamp(r: Resources) -> Resources:
    return Resources(max(r.cpus, 0.0), max(r.memory, 0.0), max(r.gpus, 0),
                     {k: max(v, 0) for k, v in r.accelerators.items()})


def cluster_infos(objs: list[Obj], reservations: list[Reservation]) -> list[ClusterInfo]:
    out = []
    for obj in objs:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        name = str(meta.get("name"))
        ready = status.get("phase") in ("Ready", "Scaling") and not meta.get("deletionTimestamp")
        held = [r for r in reservations if r.cluster == name]
        nodes, queue = subtract_reservations(nodes_from_status(status), held,
                                             queue_from_status(status))
        manager = str((obj.get("spec") or {}).get("manager") or "")
        # labels the manager reports (status.labels, e.g. slurm/partition) under the user's
        labels = placement_labels(
            name, {**(status.get("labels") or {}), **(meta.get("labels") or {})})
        out.append(ClusterInfo(name, labels, ready, nodes, manager, queue))
    return out


def policy_infos(objs: list[Obj]) -> list[FilterPolicyInfo]:
    out = []
    for obj in objs:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        flt = spec.get("clusterFilter") or {}
        out.append(FilterPolicyInfo(
            name=str(meta.get("name")), namespace=str(meta.get("namespace") or "default"),
            label_selector=dict(spec.get("labelsSelector") or {}),
            include=list(flt.get("include") or []), exclude=list(flt.get("exclude") or []),
        ))
    return out


@dataclass
class ProvisionedInfo(Growable):
    eta: str = ""


def growables_of(objs: list[Obj], infos: list[ClusterInfo]) -> list[ProvisionedInfo]:
    """The provisioned clusters that can grow, with what their nodes have free now."""
    free = {i.name: [n.free for n in i.nodes] for i in infos}
    out = []
    for obj in objs:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get(
            "status") or {}
        prov = spec.get("provision")
        phase = status.get("phase")
        if not isinstance(prov, dict) or meta.get("deletionTimestamp") or phase not in (
                "Provisioning", "Ready", "Scaling"):
            continue
        block = status.get("provision") or {}
        nodes = prov.get("nodes") or {}
        lo = min_nodes(nodes)
        up = int(block.get("nodes") or 0)
        busy = phase != "Ready"
        eta = str(block.get("eta") or "")
        if not busy:
            infra = str(block.get("infra") or prov.get("infra") or "")
            eta = (datetime.now(UTC) + timedelta(seconds=expected_seconds(infra))).strftime(
                "%H:%M UTC")
        elif eta:
            eta = eta[11:16] + " UTC"
        name = str(meta.get("name"))
        node = Resources(float(prov.get("cpus") or 0), float(prov.get("memory") or 0), 0,
                         {str(k): int(v) for k, v in (prov.get("accelerators") or {}).items()})
        labels = placement_labels(
            name, {**(status.get("labels") or {}), **(meta.get("labels") or {})})
        out.append(ProvisionedInfo(name, labels, node, max(up, lo if busy else up),
                                   max(int(nodes.get("max") or lo), lo), busy,
                                   free.get(name, []), eta))
    return out


class Gone(Exception):
    """The job object was deleted or replaced by a newer one with the same name."""


def batch_holdings(entries: list[QueueEntry], recorded: dict[str, Decision],
                   ) -> dict[str, tuple[Resources, int]]:
    """Per job of the round: its per-replica request and the replicas it holds already (those
    placed before, plus a recorded decision this round repeats), for quota usage."""
    out: dict[str, tuple[Resources, int]] = {}
    for e in entries:
        r = e.req.request
        held = sum(e.req.current.values())
        if (d := recorded.get(r.key)) is not None:
            held += sum(d.assignments.values())
        out[r.key] = (r.per_replica, held)
    return out


def recorded_decision(obj: Obj, entry: QueueEntry) -> Decision | None:
    """The placement already decided for this request (same job uid and ``seq``), if a round
    recorded one: a retried round repeats it instead of deciding again."""
    req = entry.req
    if uid_of(obj) != req.request.uid:
        return None
    rec = (obj.get("status") or {}).get("placementDecision")
    if not isinstance(rec, dict) or rec.get("seq") != req.seq:
        return None
    assignments = {str(c): int(n) for c, n in (rec.get("assignments") or {}).items() if n}
    if not assignments:
        return None
    return Decision(req.request.key, req.request.uid, assignments, {},
                    str(rec.get("message") or ""))


class Prior:
    """What a status mutation found already decided (filled on each CAS attempt)."""

    def __init__(self) -> None:
        self.decision: Decision | None = None


def answered_before(obj: Obj, entry: QueueEntry, prior: Prior | None) -> bool:
    """Whether ``obj`` already records an answer to this request (kept in ``prior``, when
    given); Gone when ``obj`` is no longer the job that asked (another uid)."""
    if uid_of(obj) != entry.req.request.uid:
        raise Gone(entry.req.request.key)
    if prior is None:
        return False
    prior.decision = recorded_decision(obj, entry)
    return prior.decision is not None


def placed_mutation(entry: QueueEntry, decision: Decision, workflow_id: str,
                    prior: Prior | None = None) -> Any:
    """Record ``decision`` and its placement, unless this request was answered before: then
    nothing is written and ``prior`` holds that answer, which is what the job gets told."""
    def mutate(obj: Obj) -> Obj | None:
        if answered_before(obj, entry, prior):
            return None
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        status = obj.setdefault("status", {})
        placement = dict(entry.req.current)
        for cluster, n in decision.assignments.items():
            placement[cluster] = placement.get(cluster, 0) + n
        status["placement"] = placement
        status["placementDecision"] = {"seq": entry.req.seq,
                                       "assignments": dict(decision.assignments),
                                       "message": decision.message}
        if status.get("phase", "Pending") == "Pending":
            status["phase"] = "Scheduled"
        status["message"] = decision.message
        status["schedulerReasons"] = {}
        status.pop("preempting", None)
        status["workflowId"] = workflow_id
        if not status.get("observedGeneration"):
            # The placement acted on the spec as it was queued; a later spec change re-enqueues
            # the job and its workflow records the generation it reloaded.
            status["observedGeneration"] = (obj.get("metadata") or {}).get("generation", 0)
        return obj

    return mutate


def pending_mutation(entry: QueueEntry, decision: Decision, prior: Prior | None = None) -> Any:
    def mutate(obj: Obj) -> Obj | None:
        if answered_before(obj, entry, prior):
            return None  # placed by an earlier attempt of this round: not pending
        status = obj.setdefault("status", {})
        status["schedulerReasons"] = dict(decision.reasons)
        status["message"] = decision.message
        status["workflowId"] = entry.req.workflow_id
        if decision.victims:
            status["preempting"] = list(decision.victims)
        return obj

    return mutate


def trusted_entries(inp: PlaceBatchInput) -> tuple[PlaceBatchInput, list[PlaceOutcome]]:
    """The batch without the requests that fail the checks of :mod:`trust` (anyone who reaches
    Temporal can signal the scheduler a request), and a "gone" outcome for each of those, so the
    scheduler drops them instead of every placement stopping at one forged request."""
    kept, refused = [], []
    for e in inp.jobs:
        r = e.req
        try:
            check_job_request(r.request.key, r.request.uid, r.workflow_id)
            check_names(r.current, "cluster name")
        except (ValueError, TypeError) as exc:
            log.warning("place_batch: refused a forged or invalid request: %s", exc)
            refused.append(PlaceOutcome(str(r.request.key), str(r.request.uid), r.seq, "gone",
                                        message=f"refused: {exc}"))
            continue
        kept.append(e)
    return PlaceBatchInput(kept, inp.reservations), refused


class SchedulingActivities:
    """Built once in the control worker with its store and Temporal client."""

    def __init__(self, store: ObjectStore, client: Client) -> None:
        self.store = store
        self.client = client
        self.holders = Holders(store)  # preemption's candidates, read by change

    @activity.defn(name=act.ENQUEUE_JOB)
    async def enqueue_job(self, req: EnqueueRequest) -> None:
        """Signal-with-start the scheduler: it exists after this, with the job queued."""
        with untrusted(act.ENQUEUE_JOB):
            check_job_request(req.request.key, req.request.uid, req.workflow_id)
        await enqueue(self.client, req)

    @activity.defn(name=act.DEQUEUE_JOB)
    async def dequeue_job(self, req: DequeueRequest) -> None:
        with untrusted(act.DEQUEUE_JOB):
            check_job_request(req.key, req.uid, None, empty_uid=True)
        try:
            await self.client.get_workflow_handle(SCHEDULER_ID).signal(SIG_DEQUEUE, req)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise

    @activity.defn(name=act.PLACE_BATCH)
    async def place_batch(self, inp: PlaceBatchInput) -> PlaceBatchResult:
        """Decide for the batch, record each placement in the job's status, then tell the job.

        A retry of this activity (any run of it as a local activity, or a later round for a job
        whose placement was reported undelivered) first reads the decisions recorded by the
        attempt before and repeats them: those jobs are not scheduled again, and their replicas
        are held against the capacity the others are placed on. The recording itself is
        compare-and-swap, so an attempt that runs on beside its retry cannot record a second
        answer either."""
        inp, refused = trusted_entries(inp)
        clusters = (await self.store.list("clusters")).items
        policies = policy_infos((await self.store.list("filterpolicies")).items)
        # a local activity run again after the worker died starts at attempt 1 again
        recheck = activity.info().attempt > 1 or activity.info().is_local
        recorded = await self._recorded([e for e in inp.jobs if recheck or e.undelivered])
        held = list(inp.reservations) + [
            Reservation(e.req.request.uid, e.req.request.key, cluster,
                        e.req.request.per_replica, n, time.time())
            for e in inp.jobs if (d := recorded.get(e.req.request.key)) is not None
            for cluster, n in d.assignments.items()
        ]
        infos = cluster_infos(clusters, held)
        fresh = [e for e in inp.jobs if e.req.request.key not in recorded]
        quotas = await quota_infos(self.store, batch_holdings(inp.jobs, recorded))
        now = time.time()
        requests = [replace(e.req.request, admitted=bool(e.req.current),
                            nominated=e.nominated_until > now, waits_on=list(e.waits_on))
                    for e in fresh]
        decided = iter(schedule_batch(requests, infos, policies, quotas))
        decisions = [recorded.get(e.req.request.key) or next(decided) for e in inp.jobs]
        await self._preempt(inp, decisions, clusters, held, set(recorded))
        await self._grow(inp, decisions, clusters, infos, policies)
        limit = asyncio.Semaphore(FOLLOW_UP_CONCURRENCY)

        async def follow_up(entry: QueueEntry, decision: Decision) -> PlaceOutcome:
            async with limit:
                return await self._follow_up(entry, decision)

        gathered = asyncio.gather(
            *(follow_up(e, d) for e, d in zip(inp.jobs, decisions, strict=True))
        )
        # run as a local activity it has no heartbeats: its workflow task's timeout does that
        outcomes = await (gathered if activity.info().is_local else heartbeating(gathered))
        if any(o.status == "placed" for o in outcomes):
            await failpoints.reached(failpoints.PLACE_BATCH_SIGNALLED)
        return PlaceBatchResult(list(outcomes) + refused)

    async def _recorded(self, entries: list[QueueEntry]) -> dict[str, Decision]:
        """The decisions already recorded for these requests, by job key."""
        limit = asyncio.Semaphore(FOLLOW_UP_CONCURRENCY)

        async def one(entry: QueueEntry) -> Decision | None:
            ns, name = entry.req.request.namespace, entry.req.request.key.split("/", 1)[1]
            async with limit:
                try:
                    obj = await self.store.get("jobs", name, ns)
                except NotFound:
                    return None
            return recorded_decision(obj, entry)

        found = await asyncio.gather(*(one(e) for e in entries))
        return {d.key: d for d in found if d is not None}

    async def _preempt(self, inp: PlaceBatchInput, decisions: list[Decision],
                       clusters: list[Obj], held: list[Reservation], recorded: set[str],
                       ) -> None:
        """Victims for the jobs that did not fit and may preempt, against the capacity and
        quotas this round leaves (see :mod:`skyshift.activities.preemption`)."""
        now = time.time()
        pairs = list(zip(inp.jobs, decisions, strict=True))
        if activity.info().attempt > 1:
            await stored_nominations(
                self.store, [e for e, d in pairs if wants_to_preempt(e, d, now)], now)
        for entry, decision in pairs:
            still_nominated(entry, decision, now)
        if not any(wants_to_preempt(e, d, now) for e, d in pairs):
            return
        placed = {d.key: d for d in decisions if d.placed}
        taken = held + [
            Reservation(e.req.request.uid, e.req.request.key, cluster,
                        e.req.request.per_replica, n, now)
            for e, d in pairs if d.placed and e.req.request.key not in recorded
            for cluster, n in d.assignments.items()
        ]
        after = cluster_infos(clusters, taken)
        quotas = await quota_infos(self.store, batch_holdings(inp.jobs, placed))
        policies = policy_infos((await self.store.list("filterpolicies")).items)
        nominate(inp.jobs, decisions, await self.holders.read(), after, policies, quotas)

    async def _nominated(self, entry: QueueEntry, decision: Decision,
                         out: PlaceOutcome) -> None:
        """Evict this round's victims of ``entry`` (its nomination is recorded already), and
        report the nomination standing, so the scheduler keeps it."""
        req = entry.req.request
        if decision.victims:
            await evict(self.client, req.key, req.priority, decision.victims, decision.reclaimed)
            out.victims, out.waits_on = list(decision.victims), list(decision.waits_on)
            out.nominated_until = time.time() + NOMINATION_TTL
            await failpoints.reached(failpoints.PREEMPT_SIGNALLED)
        elif entry.nominated and entry.nominated_until > time.time():
            out.victims, out.nominated_until = list(entry.nominated), entry.nominated_until
            out.waits_on = list(entry.waits_on)

    async def _grow(self, inp: PlaceBatchInput, decisions: list[Decision], clusters: list[Obj],
                    infos: list[ClusterInfo], policies: list[FilterPolicyInfo]) -> None:
        """Jobs that fit nowhere: ask a provisioned cluster that may grow to do so, and say so
        in their pending message ("provisioning c1 (ETA ...)")."""
        waiting = [(e, d) for e, d in zip(inp.jobs, decisions, strict=True) if not d.placed]
        growables = growables_of(clusters, infos) if waiting else []
        if not growables:
            return
        asks: dict[str, int] = {}
        by_name = {g.name: g for g in growables}
        for entry, decision in waiting:
            growth = grow_for(entry.req.request, growables, policies)
            if growth is None:
                continue
            if not growth.busy:
                asks[growth.cluster] = max(asks.get(growth.cluster, 0), growth.nodes)
            eta = by_name[growth.cluster].eta or "soon"
            decision.message = f"provisioning {growth.cluster} (ETA {eta}); {decision.message}"
        for cluster, nodes in asks.items():
            try:
                await self.client.get_workflow_handle(cluster_workflow_id(cluster)).signal(
                    SIG_SCALE, ScaleRequest(nodes, "jobs waiting for capacity"))
            except RPCError as exc:  # the next round asks again
                log.warning("cannot ask cluster %s to scale: %s", cluster, exc)

    async def _follow_up(self, entry: QueueEntry, decision: Decision) -> PlaceOutcome:
        req = entry.req
        key, uid, ns = req.request.key, req.request.uid, req.request.namespace
        name = key.split("/", 1)[1]
        out = PlaceOutcome(key, uid, req.seq, "pending", message=decision.message)
        prior = Prior()
        try:
            if not decision.placed:
                if decision.message != entry.last_message and not await update_status(
                    self.store, "jobs", name, ns, pending_mutation(entry, decision, prior)
                ):
                    out.status = "gone"
                if prior.decision is None:
                    if out.status == "pending":
                        await self._nominated(entry, decision, out)
                    return out
            elif not await update_status(
                self.store, "jobs", name, ns,
                placed_mutation(entry, decision, req.workflow_id, prior),
            ):
                out.status = "gone"
                return out
            if prior.decision is not None:  # answered before: say the same again
                decision = prior.decision
                out.message = decision.message
            placement = Placement(req.seq, dict(decision.assignments), decision.message)
            if not await tell_placed(self.client, req.workflow_id, req.request, placement):
                out.status = "gone"
                return out
            out.status, out.assignments = "placed", dict(decision.assignments)
            if not req.current and req.request.created > 0:  # a first placement, not a move
                PLACEMENT_LATENCY.observe(max(time.time() - req.request.created, 0.0))
        except (NotFound, Gone):
            out.status = "gone"
        except RPCError as exc:
            out.status = "gone" if exc.status == RPCStatusCode.NOT_FOUND else "undelivered"
            log.warning("placement of %s not delivered: %s", key, exc)
        except Exception as exc:  # etcd trouble for this one job: keep it queued, retry later
            out.status = "undelivered"
            log.warning("placement follow-up of %s failed: %s", key, exc)
        return out
