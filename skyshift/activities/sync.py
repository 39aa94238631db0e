"""The skylet's sync loop: one long-running, heartbeating activity per cluster.

Each interval it asks the cluster for ``state()`` and ``replicas()`` once (steady cost per
cluster, not per job) and turns differences into the few writes and signals that matter:

* Cluster status (phase, capacity, allocatable) is written only when it changed (plus a
  ``lastHeartbeat`` refresh once a minute), never rewritten unchanged.
* A replica whose state differs from what its job workflow was told is reported to that job, one
  signal per job per interval, and the job's per-cluster counts are written (Running from here,
  so reaching Running costs the job no workflow round trip).
* Quick rounds: a manager whose listing is cheap next to how long its replicas take to start
  (``quick_poll = (seconds, window)``: Ray: every 0.2 s for 15 s) is
  listed again right after a submit and then every ``seconds`` for ``window`` seconds, so a
  start (and a short job's end) is seen within that, not within the interval; other managers
  keep their interval.
* Held starts (``activities.held_starts``): a replica's Pending -> Running is counted in etcd
  at once and told to its job a round later at the earliest, with the job's other changes, so a
  short job is told only that it ended and a job whose pods start over several rounds is told
  once (without holding, a quarter of the jobs of a 300-job drain of one-second Slurm jobs got
  a separate Running report). The job's phase in the Temporal UI lags by that round; its status
  in etcd does not.
* The scheduler is signalled when capacity is freed or when new replicas show up in the
  allocatable it reads, with how many per job (so it drops its reservations for exactly those:
  a job's replicas may appear over several rounds). A batch cluster's queue (``status.queue``:
  its bound and what pends there) is written the same way; room in it counts as freed capacity.
* Unreachable for longer than ``lost_after``: phase Error, and every job with live replicas here
  is told "lost" so it fails over. Back again: phase Ready, the jobs are told "recovered" (they
  delete what moved away), and replicas of jobs that no longer exist are removed.
* A Cluster whose adapter reaches a physical cluster an older Cluster already has
  (``activities.identity``) is held in phase Error naming that one; nothing is reported or
  swept from it, so one cluster's capacity and replicas are never counted under two names.
* Replicas of jobs that no longer exist (or are no longer placed here) are also swept every
  ``orphan_sweep`` seconds while the cluster is Ready: a job's teardown gives up on a cluster
  after its ``teardown_timeout``, which a backlog of deletes in the skylet's queue can exceed
  with the cluster in good health (1,000 jobs deleted at once in bench/k8s_scale.py left 12
  pods behind that nothing else would have removed).

The activity returns when the phase changes (so the ClusterWorkflow records it in its search
attributes) or after ``max_duration``; the ClusterWorkflow then starts the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from skyshift.activities import held_starts, identity
from skyshift.activities.clusters import (
    ClusterContext,
    Seen,
    SignalsFailed,
    SkyletActivities,
    heartbeating,
    signal_all,
    update_of,
)
from skyshift.activities.job_view import tell_drift, workflow_holds
from skyshift.activities.store import update_status
from skyshift.activities.teardown import TeardownConfig
from skyshift.activities.trust import check_job_request, check_name, check_uid, untrusted
from skyshift.compat.base import cluster_identity
from skyshift.compat.errors import CompatError, Permanent, Transient, Unsupported
from skyshift.compat.errors import NotFound as NotFoundCompat
from skyshift.compat.types import ClusterState, ReplicaStatus
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    CapacityChanged,
    ClusterEvent,
    ReplicaReport,
    ReplicaUpdate,
    SyncInput,
    SyncResult,
)
from skyshift.contract.names import (
    SCHEDULER_ID,
    SIG_CAPACITY,
    SIG_CLUSTER,
    SIG_REPLICAS,
    job_workflow_id,
)
from skyshift.metrics import SYNC_ROUND
from skyshift.models.base import Obj
from skyshift.models.meta import now_iso
from skyshift.models.quantity import Resources
from skyshift.store import NotFound, list_in_pages

log = logging.getLogger(__name__)
LIVE = ("Pending", "Running")
WRITE_CONCURRENCY = 32  # job count writes in flight per round
SWEEP_GETS = 20  # jobs an orphan sweep reads one by one; more: one listing of all jobs


@dataclass
class SyncConfig:
    interval: float = 1.0
    lost_after: float = 5.0
    call_timeout: float = 5.0
    heartbeat_write: float = 60.0
    orphan_sweep: float = 60.0  # seconds between sweeps for replicas of deleted jobs
    hold_starts: int = 5  # most rounds a start is held back from its job (0: never held)
    identity_check: float = 30.0  # seconds between checks that no other Cluster is this one


def node_dict(r: Resources) -> dict[str, Any]:
    return {"cpus": r.cpus, "memory": r.memory, "gpus": r.gpus, "disk": 0.0,
            "accelerators": dict(r.accelerators)}


def queue_dict(state: ClusterState) -> dict[str, Any] | None:
    """``status.queue`` of a batch cluster (None for the others)."""
    q = state.queue
    if q is None:
        return None
    return {"limit": node_dict(q.limit), "queued": node_dict(q.queued), "jobs": q.jobs}


QUEUE_ROOM = " queue"  # the queue's room beside the nodes ``freed`` compares (no node has a
# name starting with a space)


def queue_room(queue: dict[str, Any] | None) -> dict[str, Any]:
    """Limit minus queued of a ``queue_dict``, in the shape ``freed`` compares (one "node")."""
    if queue is None:
        return {}
    limit, queued = queue["limit"], queue["queued"]
    acc = {k: v - queued["accelerators"].get(k, 0) for k, v in limit["accelerators"].items()}
    return {QUEUE_ROOM: {"cpus": limit["cpus"] - queued["cpus"],
                       "memory": limit["memory"] - queued["memory"],
                       "gpus": limit["gpus"] - queued["gpus"], "accelerators": acc}}


def freed(before: dict[str, Any] | None, after: dict[str, Any]) -> bool:
    """True when some node (or a batch queue) has more of something free than before (or is
    new)."""
    if before is None:
        return True
    for node, res in after.items():
        old = before.get(node)
        if old is None or res["cpus"] > old["cpus"] + 1e-9 or res["memory"] > old["memory"] + 1e-9:
            return True
        if res["gpus"] > old["gpus"] or any(
            v > old["accelerators"].get(k, 0) for k, v in res["accelerators"].items()
        ):
            return True
    return False


def _heartbeat() -> None:
    """Heartbeat when running as an activity (the unit tests call the syncer directly)."""
    if activity.in_activity():
        activity.heartbeat()


class Syncer:
    """One run of the sync activity (see the module docstring)."""

    def __init__(self, acts: SkyletActivities, cfg: SyncConfig) -> None:
        self.acts = acts
        self.ctx: ClusterContext = acts.ctx
        self.cfg = cfg
        self.bounds = TeardownConfig(cfg.call_timeout, cfg.lost_after)  # shared with teardown
        self.last_alloc: dict[str, Any] | None = None
        self.last_write = 0.0
        self.gained = False  # the last state() showed capacity freed
        self.holder = ""  # the older Cluster on the same physical cluster ("" when none)
        self.checked: float | None = None  # time.monotonic() of the last identity check

    async def run(self, inp: SyncInput) -> SyncResult:
        phase, lost = inp.phase, list(inp.lost_jobs)
        deadline = time.monotonic() + inp.max_duration
        down_since: float | None = None
        while time.monotonic() < deadline:
            activity.heartbeat(phase)
            round_start = time.monotonic()
            mark = self.ctx.forgets
            try:
                # A hanging cluster call (squeue with slurmctld down takes ~9 s) must not starve
                # the heartbeat, or Temporal cancels the attempt and the downtime count restarts.
                state, listing = await heartbeating(
                    asyncio.wait_for(self._observe(), self._call_timeout()), every=1.0
                )
                if not state.healthy:
                    raise Transient(state.message or "cluster reports unhealthy")
                holder = await heartbeating(
                    asyncio.wait_for(self._holder(inp), self._call_timeout()), every=1.0)
            except (Transient, TimeoutError, OSError) as exc:
                down_since = down_since or time.monotonic()
                self.ctx.down.failed(round_start)  # for a deletion (activities.teardown)
                if phase != "Error" and time.monotonic() - down_since >= self._lost_after():
                    return await self._lost(inp, str(exc) or type(exc).__name__)
                await self._pause()
                continue
            except CompatError as exc:  # Permanent / Unsupported: bad config, cannot attach
                msg = f"cannot attach cluster {inp.cluster}: {exc}"
                await self._write_cluster(inp, "Error", msg, None)
                return SyncResult("Error", msg, lost, permanent=True)
            down_since = None
            self.ctx.down.answered()
            if holder:
                msg = identity.duplicate_message(inp.cluster, holder, self.ctx.identity)
                if phase != "Error":
                    return await self._lost(inp, msg, duplicate=True)
                await self._write_cluster(inp, "Error", msg, None)
                await self._pause()
                continue
            first = not self.ctx.primed
            # Ready with no nodes (a provisioned cluster at zero): the manager says why
            await self._write_cluster(inp, "Ready", "" if state.nodes else state.message, state)
            if self._sweep_due(first, phase):
                # Leftovers go before anything is reported, so a finished job's status never
                # counts replicas that had already moved away from this cluster.
                listing = await self._cleanup_orphans(listing)
                self.ctx.swept = time.monotonic()
            try:
                await self._report(self.ctx.since(listing, mark), first)
            except SignalsFailed as exc:  # undone: the next round reports the same changes
                log.warning("cluster %s: %s; reporting again next round", inp.cluster, exc)
                await self._pause()
                continue
            SYNC_ROUND.labels(cluster=inp.cluster).observe(time.monotonic() - round_start)
            if phase != "Ready":
                await self._recovered(lost, inp.cluster)
                return SyncResult("Ready", "", [])
            await self._pause()
        return SyncResult(phase, "", lost)

    async def _pause(self) -> None:
        """Wait for the next round, heartbeating: a poll_interval longer than the heartbeat
        timeout (5 s) must not look like a dead worker to Temporal. With ``quick_poll``, a
        submit ends the wait at once, and rounds come quicker for a while after it."""
        quick = self._quick()
        if quick is None:
            await heartbeating(asyncio.sleep(self._interval()), every=1.0)
            return
        kick = self.ctx.kick
        if not kick.is_set():
            with contextlib.suppress(TimeoutError):
                await heartbeating(asyncio.wait_for(kick.wait(), quick), every=1.0)
        kick.clear()

    def _interval(self) -> float:
        """Seconds between rounds: the manager's own (``poll_interval`` in a Slurm cluster's
        config) or the skylet's."""
        own = getattr(self.ctx.manager, "poll_interval", None)
        return float(own) if own else self.cfg.interval

    def _quick(self) -> float | None:
        """The wait before the next round when the manager has ``quick_poll`` (None without):
        its quick seconds within its window after the last submit, else the interval."""
        quick = getattr(self.ctx.manager, "quick_poll", None)
        if quick is None:
            return None
        seconds, window = quick
        interval = self._interval()
        if time.monotonic() - self.ctx.submitted < window:
            return min(float(seconds), interval)
        return interval

    def _call_timeout(self) -> float:
        """The configured bound, or more for a manager whose one listing is slow by nature."""
        return self.bounds.bounds(self.ctx.manager)[0]

    def _lost_after(self) -> float:
        """Unreachable for this long means lost: never less than two slow rounds."""
        return self.bounds.bounds(self.ctx.manager)[1]

    async def _observe(self) -> tuple[ClusterState, list[ReplicaStatus]]:
        """Replicas first, then state: every replica listed is accounted in the allocatable we
        write, so the scheduler may drop its reservation for it once we report it seen."""
        manager = await self.ctx.connect()
        listing = await manager.replicas()
        return await manager.state(), listing

    async def _holder(self, inp: SyncInput) -> str:
        """The older Cluster reaching the same physical cluster, checked every
        ``identity_check`` seconds (see ``activities.identity``)."""
        now = time.monotonic()
        if self.checked is None or now - self.checked >= self.cfg.identity_check:
            try:
                self.ctx.identity = await cluster_identity(self.ctx.manager)
            except (Permanent, Unsupported, NotFoundCompat) as exc:
                # a cluster that cannot tell what it is is not refused for that
                log.warning("cluster %s: no identity (%s)", inp.cluster, exc)
                self.ctx.identity = ""
            self.holder = await identity.claim(self.acts.store, inp.cluster, inp.uid,
                                               self.ctx.identity)
            self.checked = now
        return self.holder

    async def _lost(self, inp: SyncInput, why: str, duplicate: bool = False) -> SyncResult:
        msg = why if duplicate else (
            f"cluster {inp.cluster} unreachable for more than {self._lost_after():g}s: {why}")
        log.warning(msg)
        await self._write_cluster(inp, "Error", msg, None)
        event = ClusterEvent(inp.cluster, "lost", msg)
        jobs = self.ctx.live_jobs()
        told = await signal_all(self.acts.client, dict.fromkeys(jobs, event), SIG_CLUSTER)
        return SyncResult("Error", msg, sorted(set(told) | set(inp.lost_jobs)))

    async def _recovered(self, lost: list[str], name: str) -> None:
        if lost:
            event = ClusterEvent(name, "recovered", f"cluster {name} is reachable again")
            await signal_all(self.acts.client, dict.fromkeys(lost, event), SIG_CLUSTER)
        try:
            await self._tell_scheduler({}, True)
        except SignalsFailed as exc:  # the next capacity change tells it again
            log.warning("cluster %s is back but %s", name, exc)

    async def _write_cluster(
        self, inp: SyncInput, phase: str, message: str, state: ClusterState | None
    ) -> None:
        cap = {n.name: node_dict(n.capacity) for n in state.nodes} if state else None
        alloc = {n.name: node_dict(n.allocatable) for n in state.nodes} if state else None
        labels = dict(state.labels) if state else None
        queue = queue_dict(state) if state else None
        refresh = time.monotonic() - self.last_write >= self.cfg.heartbeat_write

        def mutate(obj: Obj) -> Obj | None:
            if inp.uid and (obj.get("metadata") or {}).get("uid") != inp.uid:
                return None
            status = obj.setdefault("status", {})
            if status.get("phase") == "Deleting" or (obj.get("metadata") or {}).get(
                "deletionTimestamp"
            ):
                return None
            if phase == "Ready" and status.get("phase") == "Scaling":
                phase_now, message_now = "Scaling", str(status.get("message") or "")
            else:  # a provisioned cluster's ClusterWorkflow ends its Scaling itself
                phase_now, message_now = phase, message
            new = dict(status, phase=phase_now, message=message_now)
            if cap is not None and alloc is not None:
                new["capacity"], new["allocatable"] = cap, alloc
                if queue is not None:
                    new["queue"] = queue
                else:
                    new.pop("queue", None)
            if labels is not None:
                new["labels"] = labels
            if new == status and not refresh:
                return None
            new["lastHeartbeat"] = now_iso()
            obj["status"] = new
            return obj

        if await update_status(self.acts.store, "clusters", inp.cluster, None, mutate) and refresh:
            self.last_write = time.monotonic()
        if alloc is not None:
            alloc = {**alloc, **queue_room(queue)}
            self.gained = freed(self.last_alloc, alloc)
            self.last_alloc = alloc

    async def _report(self, listing: list[ReplicaStatus], first: bool) -> None:
        """Tell jobs what changed since the last round, and remember that they were told.

        The table says what each job was told, and ``write_counts`` reads it, so it is updated
        first; but if the round dies before the writes and signals are done (the activity is
        cancelled, a write fails) the changes are undone, so the next round reports them again.
        Reporting twice is harmless (jobs ignore what they already know); never reporting left
        jobs stuck Scheduled with every replica running.
        """
        ctx = self.ctx
        undo: dict[str, Seen | None] = {}
        listed, primed, held = set(ctx.listed), ctx.primed, dict(ctx.held)
        try:
            await self._report_changes(listing, first, undo)
        except BaseException:
            for name, prev in undo.items():
                if prev is None:
                    ctx.table.pop(name, None)
                else:
                    ctx.table[name] = prev
            ctx.listed, ctx.primed, ctx.held = listed, primed, held
            raise

    async def _report_changes(
        self, listing: list[ReplicaStatus], first: bool, undo: dict[str, Seen | None]
    ) -> None:
        ctx = self.ctx
        ctx.rounds += 1
        reports: dict[str, ReplicaReport] = {}
        touched: dict[str, tuple[str, str]] = {}  # uid -> (namespace, job)
        new_uids: dict[str, int] = {}  # job uid -> replicas listed for the first time
        current = {r.name: r for r in listing}
        for r in listing:
            if r.name not in ctx.listed:
                new_uids[r.job_uid] = new_uids.get(r.job_uid, 0) + 1
            prev = ctx.table.get(r.name)
            if prev is not None and (
                r.attempt < prev.attempt or (prev.state, prev.attempt) == (r.state, r.attempt)
            ):
                continue
            undo.setdefault(r.name, prev)
            ctx.record([r])
            ctx.held.pop(r.name, None)  # a held start is superseded by what is reported now
            touched[r.job_uid] = (r.namespace, r.job_name)
            if prev is None and first and r.state in LIVE:
                continue  # nothing the job must decide on; counts are written below
            if self.cfg.hold_starts and held_starts.plain_start(prev, r):
                ctx.held[r.name] = ctx.rounds  # counted Running now; told later (see below)
                continue
            wf = job_workflow_id(r.namespace, r.job_name)
            reports.setdefault(wf, ReplicaReport(ctx.name)).updates.append(update_of(r))
        held_starts.release(ctx, current, reports, self.cfg.hold_starts)
        for name in [n for n in ctx.table if n in ctx.listed and n not in current]:
            seen = ctx.table.pop(name)
            undo.setdefault(name, seen)
            touched[seen.uid] = (seen.namespace, seen.job)
            wf = job_workflow_id(seen.namespace, seen.job)
            reports.setdefault(wf, ReplicaReport(ctx.name)).updates.append(ReplicaUpdate(
                name, seen.rank, seen.attempt, "Failed", None, "Lost",
                "the replica disappeared from the cluster",
            ))
        ctx.listed = set(current)
        ctx.primed = True
        # A burst makes one round write hundreds of jobs: one etcd round trip after another
        # held every job's Running back by the whole round's writes; they are independent.
        limit = asyncio.Semaphore(WRITE_CONCURRENCY)

        async def write(uid: str, ns: str, job: str) -> None:
            async with limit:
                _heartbeat()
                finished = await self.acts.write_counts(ns, job, uid)
                # the report of its last replica says the job's final phase is written
                if finished and (report := reports.get(job_workflow_id(ns, job))) is not None:
                    report.finished = True

        tasks = [asyncio.ensure_future(write(uid, ns, job)) for uid, (ns, job) in touched.items()]
        try:
            await asyncio.gather(*tasks)
        except BaseException:  # one failed or was cancelled: stop the rest, the round is undone
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if reports:
            await signal_all(self.acts.client, dict(reports), SIG_REPLICAS)
        if new_uids or self.gained:
            await self._tell_scheduler(new_uids, self.gained)

    async def _tell_scheduler(self, new: dict[str, int], gained: bool) -> None:
        """``new``: replicas per job uid that the allocatable written this round accounts for
        the first time (the scheduler drops that many of its reservations)."""
        counts = dict(sorted(new.items()))
        payload = CapacityChanged(self.ctx.name, list(counts), gained, seen_counts=counts)
        # No scheduler yet (NOT_FOUND) means nothing is queued. Any other failure must not be
        # swallowed: the scheduler would hold its reservations for these replicas until they
        # expire, counting them twice against an allocatable that already shows them, and keep
        # fitting jobs pending meanwhile. SignalsFailed makes the round report them again.
        await signal_all(self.acts.client, {SCHEDULER_ID: payload}, SIG_CAPACITY)

    async def _cleanup_orphans(self, listing: list[ReplicaStatus]) -> list[ReplicaStatus]:
        """Delete replicas whose job no longer exists, or whose job is no longer placed on this
        cluster (moved away while the cluster was unreachable, or the skylet was down); return
        what remains. Finished replicas of jobs still placed here stay: they hold the logs."""
        jobs = {(r.namespace, r.job_name, r.job_uid) for r in listing}
        manager = self.ctx.manager
        removed: set[str] = set()
        stored = await self._stored_jobs({(ns, job) for ns, job, _ in jobs})
        for ns, job, uid in sorted(jobs):
            why, exists = "deleted job", False
            obj = stored.get((ns, job))
            if obj is not None and (obj.get("metadata") or {}).get("uid") == uid:
                placement = (obj.get("status") or {}).get("placement") or {}
                if placement.get(self.ctx.name):
                    continue
                # etcd's copy of the placement alone is not enough: the workflow decides
                holds = await workflow_holds(self.acts.client, ns, job, self.ctx.name)
                if holds is None:
                    continue
                if holds:
                    log.warning("cluster %s: %s/%s holds replicas here that its stored "
                                "placement misses; keeping them", self.ctx.name, ns, job)
                    await tell_drift(self.acts.client, ns, job, self.ctx.name)
                    continue
                why, exists = "job no longer placed here", True
            log.info("cluster %s: removing replicas of %s/%s (%s)", self.ctx.name, ns, job, why)
            try:
                names = await manager.delete_job(uid)
            except CompatError as exc:
                log.warning("cleanup of %s/%s failed: %s", ns, job, exc)
                continue
            self.ctx.forget(names)
            removed.update(names)
            removed.update(r.name for r in listing if r.job_uid == uid)
            if exists:  # the job lives on elsewhere: stop counting replicas here
                await self.acts.write_counts(ns, job, uid)
        return [r for r in listing if r.name not in removed]

    def _sweep_due(self, first: bool, phase: str) -> bool:
        """Sweep for orphans this round: the first listing of this process, the round that
        brings the cluster back, or ``orphan_sweep`` seconds after the last sweep."""
        return (first or phase != "Ready"
                or time.monotonic() - self.ctx.swept >= self.cfg.orphan_sweep)

    async def _stored_jobs(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Obj]:
        """The stored jobs among ``keys`` ((namespace, name)): one read each for a few, one
        paginated listing of every job for many (a sweep of a busy cluster)."""
        store, out = self.acts.store, {}
        if len(keys) <= SWEEP_GETS:
            for ns, name in keys:
                with contextlib.suppress(NotFound):
                    out[(ns, name)] = await store.get("jobs", name, ns)
            return out
        for obj in await list_in_pages(store, "jobs"):
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
            if key in keys:
                out[key] = obj
        return out


class SkyletWithSync(SkyletActivities):
    """A cluster's activities including the sync loop (what the skylet manager registers)."""

    def __init__(self, *args: Any, sync: SyncConfig | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sync_config = sync or SyncConfig()
        self.teardown = TeardownConfig(self.sync_config.call_timeout, self.sync_config.lost_after)

    @activity.defn(name=act.SYNC_CLUSTER)
    async def sync_cluster(self, inp: SyncInput) -> SyncResult:
        with untrusted(act.SYNC_CLUSTER):
            check_name(inp.cluster, "cluster name")
            check_uid(inp.uid, "cluster uid", empty=True)
            for wf in inp.lost_jobs:  # told "recovered" when the cluster is back
                check_job_request(wf.removeprefix("job/"), "", wf, empty_uid=True)
        return await Syncer(self, self.sync_config).run(inp)
