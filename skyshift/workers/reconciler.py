"""Reconciler: every Job, Service, Cluster, Pipeline and Schedule in etcd that needs a lifecycle
has a running workflow.

The API writes etcd first and starts the workflow second; a crash (or a Temporal outage) between
the two must lose nothing. So the control worker periodically, and at start, compares etcd with
Temporal's visibility (one paginated list of running SkyShift workflows, with the uid in their
memo) and calls the same idempotent starter the API calls for what is missing: a non-terminal
object, or one being deleted, without a running workflow for its uid.

It is a plain asyncio task in the control worker rather than a Temporal workflow: it holds no
state worth making durable (each pass starts from scratch), it would otherwise add history events
on every pass, and two control workers running it side by side are harmless because every action
is idempotent (signal-with-start, USE_EXISTING). The ``skyshift_jobs`` gauge (jobs by phase) is not
set here but by :mod:`skyshift.workers.job_phases`, from a watch, so it follows every change.

Objects created (or marked for deletion) less than ``grace`` seconds ago (``GRACE``, or twice
the interval when that is shorter) are left to a later pass: the API is ensuring their lifecycle
right now, and Temporal's visibility lags behind a start, the more so in a burst. In a profile of
the control worker during a 1,000-job burst (bench/k8s_scale.py), 9% of its samples were the
reconciler re-sending signal-with-start to jobs the API had just started, each of which also cost
the job a signal and a workflow task. A crash between the etcd write and the start is still
repaired, ``grace`` later.

:meth:`Reconciler.wake` runs a pass at once, without the grace: the control worker calls it when
Temporal answers again after an outage (:mod:`skyshift.workers.temporal_watch`), since objects
created meanwhile were written to etcd while their workflows could not start, and the API's own
retries (:mod:`skyshift.api.lifecycle_retry`) die with an API server that restarted meanwhile.

Each pass also runs the requeue sweep over the jobs it listed (:mod:`skyshift.workers.requeue`):
jobs waiting for a placement the scheduler no longer holds ask for it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from temporalio.client import Client

from skyshift.contract.lifecycles import LIFECYCLES, Lifecycle
from skyshift.lifecycle import starter
from skyshift.lifecycle.convert import parse_time
from skyshift.models.registry import kind_info
from skyshift.store import ObjectStore, list_in_pages
from skyshift.workers.common import cancel_and_wait
from skyshift.workers.requeue import RequeueSweep

log = logging.getLogger(__name__)
QUERY = (
    f"SkyShiftKind IN ({', '.join(repr(lc.kind) for lc in LIFECYCLES)}) "
    "AND ExecutionStatus = 'Running'"
)
#: seconds an object is left to the API after its creation or deletion mark (see the docstring)
GRACE = 15.0


class Reconciler:
    def __init__(self, store: ObjectStore, client: Client, interval: float = 30.0,
                 grace: float | None = None) -> None:
        self.store = store
        self.client = client
        self.interval = interval
        self.grace = min(2 * interval, GRACE) if grace is None else grace
        self._now = time.time()
        self._grace_now = self.grace
        self._woken = asyncio.Event()
        self._skip_grace = False
        #: passes run because of :meth:`wake` (for logs and tests)
        self.woken_passes = 0
        self.requeue = RequeueSweep(client)

    def wake(self) -> None:
        """Run a pass now, ensuring recent objects too (Temporal is back after an outage)."""
        self._skip_grace = True
        self._woken.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            woken, self._skip_grace = self._skip_grace, False
            self._woken.clear()
            try:
                started = await self.reconcile_once(skip_grace=woken)
                self.woken_passes += woken
                if started:
                    log.info("reconciler ensured %d lifecycles%s", started,
                             " (Temporal is back)" if woken else "")
            except Exception as exc:  # next pass will try again; never kill the worker
                log.warning("reconcile pass failed: %s", exc)
            await self._pause(stop)

    async def _pause(self, stop: asyncio.Event) -> None:
        """Until the interval is over, ``stop`` is set or :meth:`wake` is called."""
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._woken.wait())]
        try:
            await asyncio.wait(waits, timeout=self.interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waits)

    async def _running(self) -> dict[str, str]:
        out: dict[str, str] = {}
        async for wf in self.client.list_workflows(QUERY):
            memo = await wf.memo()
            out[wf.id] = str(memo.get("uid") or "")
        return out

    def _recent(self, obj: dict[str, Any]) -> bool:
        """Created, or marked for deletion, within ``grace`` of this pass (the API is on it)."""
        meta = obj.get("metadata") or {}
        at = parse_time(meta.get("deletionTimestamp") or meta.get("creationTimestamp"))
        return self._now - at < self._grace_now

    async def reconcile_once(self, skip_grace: bool = False) -> int:
        """One pass; ``skip_grace``: also ensure objects created within the grace period."""
        self._now = time.time()
        self._grace_now = 0.0 if skip_grace else self.grace
        running = await self._running()
        started = 0
        listed: dict[str, list[dict[str, Any]]] = {}
        for lc in LIFECYCLES:
            objs = listed[lc.kind] = await list_in_pages(self.store, kind_info(lc.kind).plural)
            for obj in objs:
                if self._missing(lc, obj, running):
                    started += await self._ensure(obj)
        await self._sweep(listed["Job"], listed["Cluster"])
        return started

    async def _sweep(self, jobs: list[dict[str, Any]], clusters: list[dict[str, Any]]) -> None:
        names = {str((c.get("metadata") or {}).get("name")) for c in clusters}
        try:
            await self.requeue.sweep(jobs, self._recent, names)
        except Exception as exc:  # the next pass sweeps again
            log.warning("requeue sweep failed: %s", exc)

    @staticmethod
    def _missing(lc: Lifecycle, obj: dict[str, Any], running: dict[str, str]) -> bool:
        """Whether ``obj`` needs its lifecycle ensured: no workflow runs for its uid, and the
        workflow has not ended by itself (a Job or Pipeline that finished, not being deleted)."""
        meta = obj.get("metadata") or {}
        phase = (obj.get("status") or {}).get("phase")
        if phase in lc.ended and not meta.get("deletionTimestamp"):
            return False
        return running.get(lc.object_workflow_id(obj)) != meta.get("uid")

    async def _ensure(self, obj: dict[str, Any]) -> int:
        if self._recent(obj):
            return 0
        try:
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                await starter.notify_deleting(self.client, obj)
            else:
                await starter.ensure_lifecycle(self.client, obj)
            return 1
        except Exception as exc:
            log.warning("cannot ensure lifecycle of %s: %s", (obj.get("metadata") or {}).get(
                "name"), exc)
            return 0
