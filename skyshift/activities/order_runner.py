"""The skylet's side of submit orders (see :mod:`skyshift.activities.orders`).

One runner per cluster in the skylet manager, beside the cluster's worker. It follows the
cluster's orders in etcd (a watch, and a listing every ``recheck`` seconds and after the watch
breaks) and carries each out as the ``submit_replicas`` activity would:

* the order is checked as an untrusted input (a forged or corrupt one is dropped, logged);
* under the job's lock (``ClusterContext.job_locks``, also taken by ``delete_replicas``) the
  order is read again: one withdrawn meanwhile is not carried out;
* the env values are read from the job's object, the replicas are submitted (idempotent by
  name; ``RESUBMIT`` set when the order may have been carried out before: by an earlier try of
  this runner, or by a skylet process before this one), their states are recorded in the table
  of what the job was told (a start as held: the sync loop tells it a round later, with the
  job's other changes, or not at all if the job ends first) and the job's counts are written;
* then the order is deleted. A cluster that cannot take it now (``Transient``, a timeout) gets it
  again after ``retry`` seconds, doubling up to ``MAX_BACKOFF`` (the order is in etcd: it waits
  there through a skylet restart too, where an activity would wait in Temporal; a cluster lost
  meanwhile makes the job withdraw it and move); one that refuses it for good (``Permanent``,
  ``Unsupported``) is reported to the job as a ``rejected`` cluster event, and the job fails
  with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from temporalio.exceptions import ApplicationError

from skyshift.activities.clusters import (
    ClusterContext,
    SignalsFailed,
    SkyletActivities,
    signal_all,
    with_env_values,
)
from skyshift.activities.orders import ORDERS, check_order, order_of
from skyshift.compat.base import RESUBMIT
from skyshift.compat.errors import CompatError, Transient
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import REJECTED, ClusterEvent, SubmitOrder, uid8
from skyshift.contract.names import SIG_CLUSTER, job_workflow_id
from skyshift.models.base import Obj
from skyshift.store import NotFound, StoreError

log = logging.getLogger(__name__)
ORDER_CONCURRENCY = 64  # orders carried out at once per cluster (the activity worker's was 256)
SUBMIT_TIMEOUT = 300.0  # seconds one submit may take (the activity's start-to-close timeout)
MAX_BACKOFF = 30.0  # seconds between two tries of an order the cluster cannot take now


def record_ordered(ctx: ClusterContext, statuses: list[ReplicaStatus]) -> None:
    """Record what the job knows of replicas it ordered: that they are Pending. A replica that
    already runs is recorded Running (its count in etcd says so at once) and held, so the sync
    loop tells the job later; one already finished is not recorded, so the next round reports
    it."""
    for r in statuses:
        if r.state in ("Pending", "Running"):
            ctx.record([r])
        if r.state == "Running":
            ctx.held[r.name] = ctx.rounds


class OrderRunner:
    """Carries out one cluster's submit orders until cancelled."""

    def __init__(self, acts: SkyletActivities, *, recheck: float = 10.0,
                 retry: float = 2.0) -> None:
        self.acts = acts
        self.ctx = acts.ctx
        self.store = acts.store
        self.recheck = recheck
        self.retry = retry
        self.running: dict[str, asyncio.Task[None]] = {}
        # orders that failed for now: name -> (failures, when to try again: time.monotonic())
        self.failed: dict[str, tuple[int, float]] = {}
        self.tried: set[str] = set()  # orders this runner submitted at least once
        self.announced: set[str] = set()  # orders seen written after this runner started
        self.relist = asyncio.Event()
        self.limit = asyncio.Semaphore(ORDER_CONCURRENCY)

    async def run(self) -> None:
        watcher: asyncio.Task[None] | None = None
        try:
            while True:
                self.relist.clear()
                try:
                    listing = await self.store.list(ORDERS, self.ctx.name)
                except StoreError as exc:
                    log.warning("cluster %s: cannot list submit orders: %s", self.ctx.name, exc)
                    await asyncio.sleep(1.0)
                    continue
                if watcher is None or watcher.done():
                    watcher = asyncio.create_task(self._watch(listing.resource_version))
                names = {str((o.get("metadata") or {}).get("name")) for o in listing.items}
                for gone in set(self.failed) - names:  # withdrawn: not waited for
                    del self.failed[gone]
                for gone in set(self.ctx.ordering) - names - set(self.running):
                    del self.ctx.ordering[gone]
                now = time.monotonic()
                for obj in listing.items:
                    name = str((obj.get("metadata") or {}).get("name"))
                    if self.failed.get(name, (0, now))[1] <= now:
                        self._start(obj)
                wait = min([self.recheck] + [max(at - now, 0.05)
                                             for _, at in self.failed.values()])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.relist.wait(), wait)
        finally:
            tasks = list(self.running.values()) + ([watcher] if watcher else [])
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, revision: str) -> None:
        try:
            async for ev in self.store.watch(ORDERS, self.ctx.name, from_revision=revision):
                if ev.type == "ADDED":
                    self.announced.add(str((ev.object.get("metadata") or {}).get("name")))
                    self._start(ev.object)
        except StoreError as exc:
            log.warning("cluster %s: submit order watch ended: %s", self.ctx.name, exc)
        finally:
            self.relist.set()

    def _start(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name or name in self.running:
            return
        task = asyncio.create_task(self._one(name, obj))
        self.running[name] = task
        task.add_done_callback(lambda _: self.running.pop(name, None))

    async def _one(self, name: str, obj: Obj) -> None:
        try:
            order = order_of(obj)
            check_order(order)
            if order.submit.cluster != self.ctx.name:
                raise ValueError(f"order for cluster {order.submit.cluster!r}")
        except (ValueError, TypeError) as exc:
            log.warning("cluster %s: dropped a forged or invalid submit order %s: %s",
                        self.ctx.name, name, exc)
            await self._remove(name)
            self.announced.discard(name)
            return
        job = order.submit.job
        self.ctx.ordering[name] = job_workflow_id(job.namespace, job.name)
        async with self.limit:
            try:
                done = await self._locked(order)
            except Exception:  # a store or Temporal error: tried again after ``retry``
                log.exception("cluster %s: submit order %s failed", self.ctx.name, name)
                done = False
        if done:
            self.ctx.ordering.pop(name, None)
            self.failed.pop(name, None)
            await self._remove(name)
            self.tried.discard(name)
            self.announced.discard(name)
        else:  # tried again after retry, 2x retry, ... up to MAX_BACKOFF seconds
            failures = self.failed.get(name, (0, 0.0))[0] + 1
            pause = min(self.retry * 2 ** (failures - 1), MAX_BACKOFF)
            self.failed[name] = (failures, time.monotonic() + pause)

    async def _locked(self, order: SubmitOrder) -> bool:
        async with self.ctx.job_locks.holding([uid8(order.submit.job.uid)]):
            try:  # withdrawn while it waited (the job's replicas here are being deleted)
                await self.store.get(ORDERS, order.name, self.ctx.name)
            except NotFound:
                return True
            resubmit = order.name in self.tried or order.name not in self.announced
            self.tried.add(order.name)
            return await self._carry_out(order, resubmit)

    async def _carry_out(self, order: SubmitOrder, resubmit: bool) -> bool:
        job = order.submit.job
        try:
            replicas = await with_env_values(self.store, job, order.submit.replicas)
        except ApplicationError:  # the job is gone: nothing to run for it
            return True
        retry = RESUBMIT.set(resubmit)
        try:
            manager = await self.ctx.connect()
            statuses = await asyncio.wait_for(manager.submit(replicas), SUBMIT_TIMEOUT)
        except (Transient, OSError, TimeoutError) as exc:
            log.warning("cluster %s: submit of %s/%s failed for now: %s", self.ctx.name,
                        job.namespace, job.name, exc or type(exc).__name__)
            return False
        except CompatError as exc:  # Permanent, Unsupported, NotFound: retrying cannot fix it
            return await self._reject(order, str(exc))  # the activity's message was this
        finally:
            RESUBMIT.reset(retry)
        record_ordered(self.ctx, statuses)
        self.ctx.submitted = time.monotonic()
        self.ctx.kick.set()
        await self.acts.write_counts(job.namespace, job.name, job.uid)
        return True

    async def _reject(self, order: SubmitOrder, why: str) -> bool:
        job = order.submit.job
        log.warning("cluster %s refused %s/%s: %s", self.ctx.name, job.namespace, job.name, why)
        event = ClusterEvent(self.ctx.name, REJECTED, why)
        try:
            await signal_all(self.acts.client, {job_workflow_id(job.namespace, job.name): event},
                             SIG_CLUSTER)
        except SignalsFailed:
            return False  # Temporal is away: the order is tried (and refused) again
        return True

    async def _remove(self, name: str) -> None:
        with contextlib.suppress(NotFound, StoreError):  # left: carried out again (idempotent)
            await self.store.delete(ORDERS, name, self.ctx.name)


def start_runner(acts: SkyletActivities, **kwargs: Any) -> asyncio.Task[None]:
    return asyncio.create_task(OrderRunner(acts, **kwargs).run())
