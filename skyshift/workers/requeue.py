"""The requeue sweep: a job waiting for a placement that the scheduler no longer holds asks again.

A JobWorkflow of lifecycle revision ``SUBMIT_ORDERS`` waits for its placement without a timer
(the ``requeue_after`` timer, started and cancelled, was 2 of its history events). What that
timer guarded against is the scheduler losing the request: its workflow terminated or reset
(a new run chain starts with an empty queue), or a placement recorded in etcd whose ``placed``
signal went with the scheduler. The control worker's reconciler runs this sweep on each pass,
over the jobs it lists anyway:

* a job that wants a placement by its status (Pending, or fewer replicas placed than its spec
  asks) and is missing from the scheduler's queue (the ``queue`` query) in two passes in a row
  is sent the ``requeue`` signal;
* when the scheduler's run chain changed since the last pass (or no scheduler runs), every job
  still Pending or Scheduled is sent it: one whose answer was lost with the old scheduler shows
  Scheduled in etcd while its workflow still waits.

* a job whose status places replicas on a cluster that no longer exists (in two passes in a
  row) is told that cluster was deleted, as the cluster's teardown tells the jobs it finds:
  one whose replicas were only ordered there, with the cluster's skylet already gone, has no
  search attribute naming the cluster for the teardown's fallback to find it by.

A job that does not wait for a placement ignores the signal; one that does asks the scheduler
again (signal-with-start, so a scheduler that is gone is started). Two control workers sweeping
side by side send a job two signals, and the scheduler keeps the newer request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from skyshift.contract.jobs import ClusterEvent, QueueView, Requeue
from skyshift.contract.names import (
    QUERY_QUEUE,
    SCHEDULER_ID,
    SIG_CLUSTER,
    SIG_REQUEUE,
    job_workflow_id,
)
from skyshift.lifecycle.convert import desired_replicas
from skyshift.models.base import Obj
from skyshift.models.job import TERMINAL_PHASES

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, name)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def waiting(obj: Obj) -> str:
    """Why the job may wait for a placement: "unplaced" (by its status), "scheduled" (placed,
    nothing started: its answer may have been lost with a scheduler), or "" (neither)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    if meta.get("deletionTimestamp") or phase in TERMINAL_PHASES:
        return ""
    placement = status.get("placement") or {}
    placed = sum(n for n in placement.values() if isinstance(n, int) and not isinstance(n, bool))
    if phase == "Pending" or placed < desired_replicas(obj):
        return "unplaced"
    return "scheduled" if phase == "Scheduled" else ""


def stranded(obj: Obj, clusters: set[str]) -> list[str]:
    """The clusters an unfinished job's status places replicas on that no longer exist."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in TERMINAL_PHASES:
        return []
    return sorted(c for c, n in (status.get("placement") or {}).items()
                  if n and c not in clusters)


class RequeueSweep:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.run: str | None = None  # the scheduler's run chain at the last pass
        self.suspects: set[Key] = set()  # missing from the queue at the last pass
        self.on_gone: set[tuple[Key, str]] = set()  # placed on a cluster gone, last pass
        self.told_gone: set[tuple[Key, str]] = set()  # ... and told so already

    async def sweep(self, jobs: list[Obj], recent: Callable[[Obj], bool],
                    clusters: set[str] | None = None) -> int:
        """One pass over ``jobs`` (objects within the reconciler's grace are left alone; the
        names of the Clusters that exist: ``clusters``); returns how many jobs were told."""
        told = 0 if clusters is None else await self._stranded(jobs, recent, clusters)
        return told + await self._requeue(jobs, recent)

    async def _stranded(self, jobs: list[Obj], recent: Callable[[Obj], bool],
                        clusters: set[str]) -> int:
        gone = {(key_of(o), c) for o in jobs if not recent(o) for c in stranded(o, clusters)}
        # told once: a job keeps a cluster gone in its placement for its finished replicas
        tell = (gone & self.on_gone) - self.told_gone
        self.on_gone, self.told_gone = gone, (self.told_gone & gone) | tell
        for (ns, name), cluster in sorted(tell):
            log.info("requeue: %s/%s is placed on cluster %s, which no longer exists",
                     ns, name, cluster)
            event = ClusterEvent(cluster, "deleted", f"cluster {cluster} no longer exists")
            await self._signal(ns, name, SIG_CLUSTER, event)
        return len(tell)

    async def _requeue(self, jobs: list[Obj], recent: Callable[[Obj], bool]) -> int:
        why = {key_of(o): w for o in jobs if (w := waiting(o)) and not recent(o)}
        if not why:
            self.suspects = set()
            return 0
        view = await self._queue()
        replaced = not view.run or (self.run is not None and view.run != self.run)
        self.run = view.run
        queued = set(view.keys)
        missing = {k for k, w in why.items() if w == "unplaced" and f"{k[0]}/{k[1]}" not in queued}
        told = set(why) if replaced else missing & self.suspects
        self.suspects = missing - told
        if told:
            log.info("requeue: %d jobs ask the scheduler again (%s)", len(told),
                     "the scheduler was replaced" if replaced else "not in its queue")
        await self._tell(sorted(told), "scheduler replaced" if replaced else "not queued")
        return len(told)

    async def _queue(self) -> QueueView:
        """The running scheduler's view ("" as its run when none runs: a terminated one still
        answers queries, from its last state)."""
        handle = self.client.get_workflow_handle(SCHEDULER_ID)
        try:
            desc = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return QueueView("")
            raise
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return QueueView("")
        view: QueueView = await handle.query(QUERY_QUEUE, result_type=QueueView)
        return view

    async def _tell(self, keys: list[Key], reason: str) -> None:
        for ns, name in keys:
            await self._signal(ns, name, SIG_REQUEUE, Requeue(reason))

    async def _signal(self, ns: str, name: str, signal: str, payload: Any) -> None:
        try:
            await self.client.get_workflow_handle(job_workflow_id(ns, name)).signal(
                signal, payload)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
