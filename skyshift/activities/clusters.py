"""Activities of a cluster's task queue ``skylet-<cluster>``: act on one cluster through compat.

The skylet manager builds one :class:`SkyletActivities` per cluster, around a
:class:`ClusterContext` that holds the cluster's ClusterManager and the table of replica states
last told to the job workflows. The table is what keeps signals few: submit records the states it
returned to the job, the sync loop (:mod:`skyshift.activities.sync`) signals a job only when the
cluster reports something different, and deletes forget names, so no replica's disappearance is
mistaken for a loss.

compat errors map onto Temporal retries: ``Transient`` propagates (retried with backoff by the
caller's retry policy); ``Permanent``, ``Unsupported`` and ``NotFound`` become non-retryable
ApplicationErrors whose type names the class, and the workflow turns them into a status message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from skyshift.activities.locks import KeyedLocks, lock_key_of
from skyshift.activities.store import update_status
from skyshift.activities.teardown import Downtime, TeardownConfig, unreachable_message, with_message
from skyshift.activities.trust import (
    check_name,
    check_names,
    check_namespace,
    check_replica,
    check_uid,
    untrusted,
)
from skyshift.compat.base import RESUBMIT, ClusterManager
from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient
from skyshift.compat.types import ReplicaSpec, ReplicaStatus
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    ClusterEvent,
    DeleteReplicasInput,
    DeleteReplicasResult,
    JobRef,
    ReplicaOpInput,
    ReplicaOpResult,
    ReplicaUpdate,
    SubmitInput,
    SubmitResult,
    TeardownInput,
    TeardownResult,
    uid8,
)
from skyshift.contract.names import SIG_CLUSTER, job_workflow_id
from skyshift.lifecycle.convert import counts_of, merge_counts
from skyshift.lifecycle.envs import filled, needs_values
from skyshift.models.meta import no_nul
from skyshift.store import NotFound as StoreNotFound
from skyshift.store import ObjectStore

log = logging.getLogger(__name__)
SIGNAL_CONCURRENCY = 32
EXEC_MEMORY = 256  # exec outcomes a skylet keeps per cluster for retries (see exec_once)
T = TypeVar("T")


@contextlib.contextmanager
def compat_errors() -> Iterator[None]:
    """Non-retryable ApplicationError for compat errors that retrying cannot fix."""
    try:
        yield
    except Transient:
        raise
    except CompatError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc


async def heartbeating(coro: Awaitable[T], every: float = 2.0) -> T:
    """Await ``coro`` while heartbeating, so a worker killed mid-call is noticed within the
    heartbeat timeout (not the much longer start-to-close timeout) and the call is retried."""
    task = asyncio.ensure_future(coro)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every)
        if done:
            return task.result()
        activity.heartbeat()


@dataclass
class Seen:
    """A replica as last told to its job workflow."""

    uid: str
    namespace: str
    job: str
    rank: int
    attempt: int
    state: str


def update_of(r: ReplicaStatus) -> ReplicaUpdate:
    return ReplicaUpdate(r.name, r.rank, r.attempt, r.state, r.exit_code, r.reason, r.message)


class ClusterContext:
    """One cluster in the skylet process: its manager and what the job workflows were told."""

    def __init__(self, name: str, manager: ClusterManager) -> None:
        self.name = name
        self.manager = manager
        self.table: dict[str, Seen] = {}
        self.listed: set[str] = set()  # names in the last replicas() listing
        self.primed = False  # a listing happened since this process started
        self.swept = 0.0  # time.monotonic() of the last orphan sweep (see activities.sync)
        # replicas recorded Running whose start the job has not been told yet: name -> the sync
        # round that saw it (see activities.held_starts)
        self.held: dict[str, int] = {}
        self.rounds = 0  # sync rounds so far (each compares a listing with the table)
        self.identity = ""  # the physical cluster the manager reached (see activities.identity)
        # exec requests run here (activity id -> its outcome, pending while the command runs):
        # a retry of one takes its outcome instead of running the command again
        self.execs: dict[str, asyncio.Future[ReplicaOpResult]] = {}
        self.down = Downtime()  # failing calls (set by the sync loop and teardown attempts)
        # the last submit (time.monotonic()) and its wake-up call to the sync loop, which then
        # runs its rounds at the manager's ``quick_poll`` for a while (see activities.sync)
        self.submitted = 0.0
        self.kick = asyncio.Event()
        # per job (uid8): a submit order is carried out and the job's replicas are deleted one
        # at a time (see activities.orders)
        self.job_locks = KeyedLocks()
        # submit orders taken and not carried out yet: order name -> its job's workflow id (such a
        # job is told when the cluster is lost, like one with replicas here)
        self.ordering: dict[str, str] = {}
        # forget() calls so far, and by which call each name was forgotten: a listing taken
        # before a delete must not bring the deleted replicas back (see ``since``)
        self.forgets = 0
        self.forgotten: dict[str, int] = {}
        self._connected = False

    async def connect(self) -> ClusterManager:
        if not self._connected:
            await self.manager.connect()
            self._connected = True
        return self.manager

    def record(self, statuses: list[ReplicaStatus]) -> None:
        for r in statuses:
            self.table[r.name] = Seen(r.job_uid, r.namespace, r.job_name, r.rank, r.attempt,
                                      r.state)

    def forget(self, names: list[str]) -> None:
        self.forgets += 1
        for name in names:
            self.table.pop(name, None)
            self.listed.discard(name)
            self.held.pop(name, None)
            self.forgotten[name] = self.forgets

    def since(self, listing: list[ReplicaStatus], mark: int) -> list[ReplicaStatus]:
        """``listing``, taken when ``forgets`` was ``mark``, without the replicas forgotten
        after that: their delete came after the listing, so it shows them as they were. Recorded
        again, they would count as live (an evicted job written back to Running by a round
        that listed its pods just before the eviction deleted them). Forgets at or before
        ``mark`` are settled: the listing already reflects them."""
        self.forgotten = {n: at for n, at in self.forgotten.items() if at > mark}
        return [r for r in listing if r.name not in self.forgotten]

    def names_of(self, uid: str) -> list[str]:
        return [n for n, s in self.table.items() if s.uid == uid]

    def counts(self, uid: str) -> dict[str, int]:
        seen = [s for s in self.table.values() if s.uid == uid]
        return counts_of([ReplicaUpdate("", s.rank, s.attempt, s.state) for s in seen])

    def live_jobs(self) -> list[str]:
        """Workflow ids of jobs with unfinished replicas here (told when the cluster is lost)."""
        return sorted({
            job_workflow_id(s.namespace, s.job)
            for s in self.table.values() if s.state not in ("Succeeded", "Failed")
        } | set(self.ordering.values()))


class SignalsFailed(Exception):
    """Some workflows could not be signalled for another reason than being gone (Temporal
    unavailable, overloaded, ...). Raised after every target was tried, so the caller can undo
    what it recorded as told and tell them again later."""

    def __init__(self, signal: str, failed: dict[str, str]) -> None:
        self.failed = failed
        first = next(iter(failed.items()))
        super().__init__(f"signal {signal} not delivered to {len(failed)} workflow(s), "
                         f"e.g. {first[0]}: {first[1]}")


async def signal_all(client: Client, targets: dict[str, Any], signal: str) -> list[str]:
    """Signal each workflow id its payload; returns the ids reached (gone ones are skipped).

    Raises SignalsFailed when any signal failed otherwise, after trying every target."""
    limit = asyncio.Semaphore(SIGNAL_CONCURRENCY)
    failed: dict[str, str] = {}

    async def one(wf_id: str, payload: Any) -> str | None:
        async with limit:
            try:
                await client.get_workflow_handle(wf_id).signal(signal, payload)
                return wf_id
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    failed[wf_id] = str(exc)
                return None

    done = await asyncio.gather(*(one(w, p) for w, p in targets.items()))
    if failed:
        raise SignalsFailed(signal, failed)
    return [w for w in done if w is not None]


async def with_env_values(
    store: ObjectStore, job: JobRef, replicas: list[ReplicaSpec]
) -> list[ReplicaSpec]:
    """The replicas to submit, env values read from the job's object in etcd (one read per
    call; see ``activities.envs`` for why they are not in the workflow's payloads)."""
    if not needs_values(replicas):
        return replicas
    gone = ApplicationError(
        f"job {job.namespace}/{job.name} no longer exists: its env values cannot be read",
        type="JobGone", non_retryable=True,
    )
    try:
        obj = await store.get("jobs", job.name, job.namespace)
    except StoreNotFound:
        raise gone from None
    if (obj.get("metadata") or {}).get("uid") != job.uid:
        raise gone
    envs = (obj.get("spec") or {}).get("envs") or {}
    return filled(replicas, envs if isinstance(envs, dict) else {})


def check_job_ref(job: JobRef) -> None:
    check_name(job.name, "job name")
    check_namespace(job.namespace)
    check_uid(job.uid, "job uid")


def check_replica_op(inp: ReplicaOpInput) -> None:
    """Names, the op and an exec's argv (no NUL: it cannot be a process argument)."""
    if inp.op not in ("logs", "exec"):
        raise ValueError(f"op {inp.op!r} is not logs or exec")
    check_names(inp.names, "replica name")
    if inp.op == "exec" and not inp.names:
        raise ValueError("exec names no replica")
    for arg in inp.command:
        no_nul(arg)
    if inp.tail is not None and (isinstance(inp.tail, bool) or inp.tail < 0):
        raise ValueError("tail must be a non-negative number of lines")


class SkyletActivities:
    """The activities of one cluster's task queue (built by the skylet manager)."""

    def __init__(self, ctx: ClusterContext, store: ObjectStore, client: Client) -> None:
        self.ctx = ctx
        self.store = store
        self.client = client
        self.teardown = TeardownConfig()

    async def write_counts(self, namespace: str, job: str, uid: str) -> bool:
        """Write this cluster's counts of the job; True when they made it Succeeded."""
        cluster = self.ctx.name
        finished = False

        def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal finished
            finished = False
            if (obj.get("metadata") or {}).get("uid") != uid:
                return None
            before = (obj.get("status") or {}).get("phase")
            # counted at each try: a retry after a conflict sees a delete made meanwhile
            out = merge_counts(obj, cluster, self.ctx.counts(uid))
            finished = out is not None and before != "Succeeded" and (
                (out.get("status") or {}).get("phase") == "Succeeded")
            return out

        await update_status(self.store, "jobs", job, namespace, mutate)
        return finished

    @activity.defn(name=act.SUBMIT_REPLICAS)
    async def submit_replicas(self, inp: SubmitInput) -> SubmitResult:
        """Create the replicas (idempotent by name; a higher attempt replaces the old one) and
        write the job's counts here, moving it to Running once all replicas have started."""
        with untrusted(act.SUBMIT_REPLICAS):
            check_job_ref(inp.job)
        replicas = await with_env_values(self.store, inp.job, inp.replicas)
        with untrusted(act.SUBMIT_REPLICAS):
            for replica in replicas:
                check_replica(replica)
        retry = RESUBMIT.set(activity.in_activity() and activity.info().attempt > 1)
        try:
            with compat_errors():
                manager = await self.ctx.connect()
                statuses = await heartbeating(manager.submit(replicas))
        finally:
            RESUBMIT.reset(retry)
        self.ctx.record(statuses)
        self.ctx.submitted = time.monotonic()
        self.ctx.kick.set()
        await self.write_counts(inp.job.namespace, inp.job.name, inp.job.uid)
        return SubmitResult([update_of(r) for r in statuses])

    @activity.defn(name=act.DELETE_REPLICAS)
    async def delete_replicas(self, inp: DeleteReplicasInput) -> DeleteReplicasResult:
        with untrusted(act.DELETE_REPLICAS):
            check_names(inp.names, "replica name")
            check_uid(inp.job_uid, "job uid", empty=True)
        keys = [lock_key_of(n) for n in inp.names] + ([uid8(inp.job_uid)] if inp.job_uid else [])
        async with self.ctx.job_locks.holding(keys):  # not beside a submit order of the job
            return await self._delete_replicas(inp)

    async def _delete_replicas(self, inp: DeleteReplicasInput) -> DeleteReplicasResult:
        with compat_errors():
            manager = await self.ctx.connect()
            if inp.names:
                await heartbeating(manager.delete(inp.names))
                deleted = list(inp.names)
            else:
                deleted = await heartbeating(manager.delete_job(inp.job_uid))
        names = deleted + (self.ctx.names_of(inp.job_uid) if inp.job_uid else [])
        jobs = {(s.namespace, s.job, s.uid) for n in names if (s := self.ctx.table.get(n))}
        self.ctx.forget(names)
        for namespace, job, uid in sorted(jobs):  # drop this cluster's counts of what left
            await self.write_counts(namespace, job, uid)
        return DeleteReplicasResult(deleted)

    @activity.defn(name=act.TEARDOWN_CLUSTER)
    async def teardown_cluster(self, inp: TeardownInput) -> TeardownResult:
        """Cluster deletion: remove every SkyShift replica here, then tell the jobs that had
        unfinished ones so they move elsewhere. A cluster that does not answer for
        ``teardown.give_up_after`` is given up on (:mod:`skyshift.activities.teardown`)."""
        with untrusted(act.TEARDOWN_CLUSTER):
            check_name(inp.cluster, "cluster")
        call_timeout, give_up_after = self.teardown.bounds(self.ctx.manager)
        started = time.monotonic()
        try:
            manager, listing = await heartbeating(asyncio.wait_for(
                self._teardown_listing(), call_timeout), every=1.0)
        except (Transient, TimeoutError, OSError) as exc:
            if self.ctx.down.failed(started) < give_up_after:
                raise  # retried by the workflow's policy
            return await self.give_up(inp.cluster, str(exc) or type(exc).__name__)
        self.ctx.down.answered()
        with compat_errors():
            affected, found = await self.record_teardown(set(self.ctx.live_jobs()),
                                                         len(listing))
            uids = sorted({r.job_uid for r in listing})
            for uid in uids:
                await heartbeating(manager.delete_job(uid))
            if (stop_services := getattr(manager, "stop_services", None)) is not None:
                await stop_services()  # e.g. a local cluster's HAProxy
        told = await self.forget_all(inp.cluster, affected,
                                     f"cluster {inp.cluster} was deleted")
        return TeardownResult(told, found, f"deleted {found} replicas")

    async def _teardown_listing(self) -> tuple[ClusterManager, list[ReplicaStatus]]:
        with compat_errors():
            manager = await self.ctx.connect()
            listing = await manager.replicas()
        self.ctx.record([r for r in listing if r.name not in self.ctx.table])
        return manager, listing

    async def forget_all(self, cluster: str, affected: list[str], msg: str) -> list[str]:
        """The cluster is gone: drop its replica counts from the jobs, tell ``affected``."""
        jobs = {(s.namespace, s.job, s.uid) for s in self.ctx.table.values()}
        self.ctx.forget(list(self.ctx.table))
        for namespace, job, uid in sorted(jobs):  # no skylet will count them here again
            await self.write_counts(namespace, job, uid)
        event = ClusterEvent(cluster, "deleted", msg)
        return await signal_all(self.client, dict.fromkeys(affected, event), SIG_CLUSTER)

    async def give_up(self, cluster: str, why: str) -> TeardownResult:
        """Unreachable for too long: tell the jobs known to have replicas here (the skylet's
        table and an earlier attempt's record) and say what may be left on the cluster."""
        affected, _ = await self.record_teardown(set(self.ctx.live_jobs()), 0)
        msg = unreachable_message(cluster, why)
        log.warning("%s", msg)
        await update_status(self.store, "clusters", cluster, None,
                            lambda obj: with_message(obj, msg))
        told = await self.forget_all(cluster, affected, msg)
        return TeardownResult(told, 0, msg)

    async def record_teardown(self, jobs: set[str], replicas: int) -> tuple[list[str], int]:
        """Record in the Cluster's status, before deleting anything, which jobs the teardown
        takes replicas from (``status.teardown``). A retry whose first attempt deleted them
        (and forgot them, or ran in a skylet since replaced) finds nothing left to list: it
        tells and reports from the record instead of telling no one."""
        record: dict[str, Any] = {}

        def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
            status = obj.setdefault("status", {})
            before = status.get("teardown") if isinstance(status.get("teardown"), dict) else {}
            record.update(jobs=sorted(set(before.get("jobs") or []) | jobs),
                          replicas=max(int(before.get("replicas") or 0), replicas))
            if before == record:
                return None
            status["teardown"] = dict(record)
            return obj

        if not await update_status(self.store, "clusters", self.ctx.name, None, mutate):
            return sorted(jobs), replicas
        return list(record["jobs"]), int(record["replicas"])

    async def exec_once(self, manager: ClusterManager, inp: ReplicaOpInput) -> ReplicaOpResult:
        """Run an exec request's command once. A command is not idempotent (it may append,
        delete, pay): the request's outcome is recorded before the command starts, so a retry
        (Temporal lost the completion, or timed the attempt out while it ran) takes that
        outcome, waiting for it if the command still runs. Only a failure that is an error
        (nothing ran, or the cluster could not say) lets a retry run it. The record lives in
        this skylet process: a retry on a replaced skylet cannot know, and runs it again."""
        info = activity.info()
        key = f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"

        async def run() -> ReplicaOpResult:
            res = await manager.exec(inp.names[0], inp.command, inp.timeout)
            return ReplicaOpResult(exit_code=res.exit_code, stdout=res.stdout, stderr=res.stderr)

        pending = self.ctx.execs.get(key)
        if pending is None:
            pending = self.ctx.execs[key] = asyncio.ensure_future(run())
            while len(self.ctx.execs) > EXEC_MEMORY:
                self.ctx.execs.pop(next(iter(self.ctx.execs)))
        try:
            return await asyncio.shield(pending)
        except Exception:
            if pending.done() and self.ctx.execs.get(key) is pending:
                del self.ctx.execs[key]
            raise

    @activity.defn(name=act.REPLICA_OP)
    async def replica_op(self, inp: ReplicaOpInput) -> ReplicaOpResult:
        """Logs of the named replicas that live here, or exec in the first one."""
        with untrusted(act.REPLICA_OP):
            check_replica_op(inp)
        out = ReplicaOpResult()
        try:
            manager = await self.ctx.connect()
            if inp.op == "exec":
                return await self.exec_once(manager, inp)
            # the replicas' reads go together: one slow cluster call does not queue the rest
            texts = await asyncio.gather(*(manager.logs(name, inp.tail) for name in inp.names),
                                         return_exceptions=True)
            for name, text in zip(inp.names, texts, strict=True):
                if isinstance(text, NotFound):
                    out.error = out.error or f"NotFound: {text}"  # e.g. not started yet
                elif isinstance(text, BaseException):
                    raise text
                else:
                    out.found[name] = text
        except NotFound as exc:
            out.error = f"NotFound: {exc}"
        except Permanent as exc:
            out.error = f"{type(exc).__name__}: {exc}"
        return out
