"""Activities of the control task queue that read or write objects in etcd.

Workflows never do I/O, so every status write, spec re-read and finalizer removal is one of these.
They are short and idempotent (``guaranteed_update`` of ``status`` only, with a uid check so a
newer object reusing the name is never touched), which is why the workflows run them as local
activities: no extra workflow task, no activity task round trip through the server.

Retries: store errors (etcd unavailable, CAS contention) propagate and Temporal's retry policy
retries them; an object that is gone is not an error (the write has nothing left to do).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from skyshift.activities.trust import check_plural, check_ref, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    ClusterJobsInput,
    ClusterStatusPatch,
    JobStatusPatch,
    ReadJobInput,
    ReadJobResult,
    ReadSpecResult,
    RemoveObjectInput,
)
from skyshift.contract.names import SIG_CLUSTER
from skyshift.lifecycle.convert import cap_counts, desired_replicas, parse_job
from skyshift.models.base import Obj
from skyshift.models.meta import now_iso
from skyshift.store import NotFound, ObjectStore

log = logging.getLogger(__name__)


def uid_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def stamp_times(status: dict[str, Any], started: bool, finished: bool) -> None:
    """Set ``startTime``/``completionTime`` to now when the run started/finished, once each."""
    if started and not status.get("startTime"):
        status["startTime"] = now_iso()
    if finished and not status.get("completionTime"):
        status["completionTime"] = now_iso()


def apply_job_patch(obj: Obj, patch: JobStatusPatch) -> Obj | None:
    """The status mutation of :class:`JobStatusPatch` (None: wrong uid or no change)."""
    if patch.uid and uid_of(obj) != patch.uid:
        return None
    status: dict[str, Any] = obj.setdefault("status", {})
    before = repr(status)
    deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
    if patch.phase is not None and not (deleting and patch.phase not in ("Deleting",)):
        status["phase"] = patch.phase
    if patch.message is not None:
        status["message"] = patch.message
    if patch.placement is not None:
        status["placement"] = dict(patch.placement)
    if patch.replica_status is not None:
        status["replicaStatus"] = {c: dict(v) for c, v in patch.replica_status.items()}
        # never more than spec.replicas
        cap_counts(status["replicaStatus"], desired_replicas(obj), None, status.get("placement"))
    if patch.restarts is not None:
        status["restarts"] = patch.restarts
    if patch.observed_generation is not None:
        status["observedGeneration"] = patch.observed_generation
    if patch.workflow_id is not None:
        status["workflowId"] = patch.workflow_id
    stamp_times(status, patch.started, patch.finished)
    if patch.preempted is not None:
        kept = [c for c in status.get("conditions") or [] if c.get("type") != "Preempted"]
        status["conditions"] = [*kept, {"type": "Preempted", "status": "True",
                                        "reason": "Preempted", "message": patch.preempted,
                                        "lastTransitionTime": now_iso()}]
    return obj if repr(status) != before else None


async def update_status(
    store: ObjectStore, plural: str, name: str, namespace: str | None,
    mutate: Callable[[Obj], Obj | None],
) -> bool:
    """guaranteed_update that treats a missing object as "nothing to do" (False)."""
    try:
        await store.guaranteed_update(plural, name, namespace, mutate)
    except NotFound:
        return False
    return True


async def get_same(
    store: ObjectStore, plural: str, name: str, namespace: str | None, uid: str,
) -> Obj | None:
    """The stored object while it is still the one with ``uid`` (None: deleted or replaced)."""
    try:
        obj = await store.get(plural, name, namespace)
    except NotFound:
        return None
    return obj if uid_of(obj) == uid else None


ReadT = TypeVar("ReadT", bound=ReadSpecResult)


class ReadRef(Protocol):
    namespace: str
    name: str
    uid: str


async def read_spec(
    store: ObjectStore, activity_name: str, plural: str, ref: ReadRef,
    parse: Callable[[Obj], tuple[Any, str]], result: type[ReadT],
) -> ReadT:
    """The activity ``activity_name``: ``ref`` checked (it comes from outside), then read back for
    its lifecycle, its spec parsed by ``parse``."""
    with untrusted(activity_name):
        check_ref(ref.name, ref.namespace, ref.uid, f"{plural[:-1]} name")
    obj = await get_same(store, plural, ref.name, ref.namespace, ref.uid)
    if obj is None:
        return result(found=False)
    template, invalid = parse(obj)
    meta = obj.get("metadata") or {}
    return result(
        found=True,
        generation=int(meta.get("generation") or 0),
        template=template,
        invalid=invalid,
        deleting=bool(meta.get("deletionTimestamp")),
    )


class StoreAndClient:
    """The base of activity classes built once in the control worker with its store and
    Temporal client (they write etcd and start or signal workflows)."""

    def __init__(self, store: ObjectStore, client: Client) -> None:
        self.store = store
        self.client = client


class StoreActivities(StoreAndClient):
    """The Job and Cluster lifecycles' etcd reads and writes, and every lifecycle's last delete."""

    @activity.defn(name=act.WRITE_JOB_STATUS)
    async def write_job_status(self, patch: JobStatusPatch) -> bool:
        with untrusted(act.WRITE_JOB_STATUS):
            check_ref(patch.name, patch.namespace, patch.uid, 'job name')
        return await update_status(
            self.store, "jobs", patch.name, patch.namespace, lambda o: apply_job_patch(o, patch)
        )

    @activity.defn(name=act.READ_JOB)
    async def read_job(self, inp: ReadJobInput) -> ReadJobResult:
        return await read_spec(self.store, act.READ_JOB, "jobs", inp, parse_job, ReadJobResult)

    @activity.defn(name=act.REMOVE_OBJECT)
    async def remove_object(self, inp: RemoveObjectInput) -> bool:
        """Finalizer done: delete the object, only if it is still the one with ``uid``."""
        with untrusted(act.REMOVE_OBJECT):
            check_plural(inp.plural)
            check_ref(inp.name, inp.namespace, inp.uid)
        try:
            obj = await self.store.get(inp.plural, inp.name, inp.namespace)
        except NotFound:
            return False
        if inp.uid and uid_of(obj) != inp.uid:
            return False
        try:
            await self.store.delete(
                inp.plural, inp.name, inp.namespace,
                expected_rv=(obj.get("metadata") or {}).get("resourceVersion"),
            )
        except NotFound:
            return False
        return True

    @activity.defn(name=act.WRITE_CLUSTER_STATUS)
    async def write_cluster_status(self, patch: ClusterStatusPatch) -> bool:
        with untrusted(act.WRITE_CLUSTER_STATUS):
            check_ref(patch.name, None, patch.uid, 'cluster')
        def mutate(obj: Obj) -> Obj | None:
            if patch.uid and uid_of(obj) != patch.uid:
                return None
            status = obj.setdefault("status", {})
            if status.get("phase") == patch.phase and status.get("message") == patch.message:
                return None
            status["phase"], status["message"] = patch.phase, patch.message
            return obj

        return await update_status(self.store, "clusters", patch.name, None, mutate)

    @activity.defn(name=act.NOTIFY_CLUSTER_JOBS)
    async def notify_cluster_jobs(self, inp: ClusterJobsInput) -> int:
        """Tell every running job workflow on ``cluster`` (found through the SkyShiftCluster
        search attribute) about ``event``: the fallback when the cluster's skylet cannot."""
        with untrusted(act.NOTIFY_CLUSTER_JOBS):
            check_ref(inp.cluster, what='cluster')  # it is quoted in a query
        query = (
            f"SkyShiftKind = 'Job' AND SkyShiftCluster = '{inp.cluster}' "
            "AND ExecutionStatus = 'Running'"
        )
        skip = set(inp.skip)
        told = 0
        async for wf in self.client.list_workflows(query):
            if wf.id in skip:
                continue
            try:
                await self.client.get_workflow_handle(wf.id).signal(SIG_CLUSTER, inp.event)
                told += 1
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
            await asyncio.sleep(0)
        return told
