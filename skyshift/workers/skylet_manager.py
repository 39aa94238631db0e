"""The skylet manager: ``python -m skyshift.workers.skylet_manager``.

Watches Clusters in etcd and runs one Temporal worker per cluster, on ``skylet-<name>``, around a
ClusterManager built from the Cluster's spec (``create_manager(name, manager, config)``). A
spec change (new generation or uid) rebuilds the worker; removal of the object (the
ClusterWorkflow's last step) stops it. A config the adapter rejects still gets a worker, whose
manager raises that Permanent error on every call, so the ClusterWorkflow can report it as the
cluster's status instead of waiting for a poller that never comes.

Configured by :meth:`Settings.from_env` plus ``SKYSHIFT_SYNC_INTERVAL`` (seconds between two
looks at a cluster, default 1) and ``SKYSHIFT_LOST_AFTER`` (unreachable this long -> Error and
failover, default 5). ``SKYSHIFT_SKYLET_SELECTOR`` (a label selector, e.g. ``site=lab-2``) makes
this manager serve only the clusters whose labels match, so managers on several hosts split the
clusters between them (a local cluster's replicas run on the host of the manager that serves
it); give every cluster exactly one manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

from temporalio.client import Client
from temporalio.worker import Worker

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.links import ProbeActivities
from skyshift.activities.order_runner import start_runner
from skyshift.activities.services import ServiceActivities
from skyshift.activities.sync import SkyletWithSync, SyncConfig
from skyshift.compat.base import ClusterManager, create_manager, prepare
from skyshift.compat.errors import CompatError, Permanent
from skyshift.compat.types import (
    ClusterState,
    ExecResult,
    ReplicaSpec,
    ReplicaStatus,
    ServiceSpec,
    ServiceStatus,
)
from skyshift.config import Settings
from skyshift.contract.names import skylet_queue
from skyshift.lifecycle.convert import manager_config
from skyshift.models.base import Obj
from skyshift.store import InvalidSelector, ObjectStore, Selector, StoreError, parse_selector
from skyshift.workers import payload_hints
from skyshift.workers.common import (
    clear_ready,
    connect_store,
    connect_temporal,
    env_float,
    mark_ready,
    ready_path,
    setup_logging,
    stop_event,
)
from skyshift.workers.metrics_http import start_from_env

PROBES = ProbeActivities()  # stateless: one for every cluster's worker
log = logging.getLogger(__name__)
SELECTOR_ENV = "SKYSHIFT_SKYLET_SELECTOR"


class BrokenManager:
    """Stands in for a cluster whose config the adapter rejected: every call says why."""

    def __init__(self, name: str, manager: str, error: CompatError) -> None:
        self.name, self.manager, self.error = name, manager, error

    def _fail(self) -> NoReturn:
        raise Permanent(str(self.error))

    async def connect(self) -> None:
        self._fail()

    async def close(self) -> None:
        return None

    async def state(self) -> ClusterState:
        self._fail()

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        self._fail()

    async def replicas(self) -> list[ReplicaStatus]:
        self._fail()

    async def delete(self, names: list[str]) -> None:
        self._fail()

    async def delete_job(self, job_uid: str) -> list[str]:
        self._fail()

    async def logs(self, name: str, tail: int | None = None) -> str:
        self._fail()

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        self._fail()

    async def apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        self._fail()

    async def delete_service(self, namespace: str, name: str) -> None:
        self._fail()


def build_manager(obj: Obj) -> ClusterManager:
    name = str((obj.get("metadata") or {}).get("name"))
    manager, config = manager_config(obj)
    try:
        return create_manager(name, manager, config)
    except CompatError as exc:
        log.warning("cluster %s: %s", name, exc)
        return BrokenManager(name, manager, exc)
    except Exception as exc:  # a bug in an adapter's constructor must not stop the others
        log.exception("cluster %s: cannot build its manager", name)
        return BrokenManager(name, manager, Permanent(f"cannot build manager: {exc}"))


@dataclass
class Skylet:
    key: tuple[str, int, tuple[str, ...]]  # (uid, generation, sky clusters): rebuilt on a change
    worker: Worker
    task: asyncio.Task[None]
    ctx: ClusterContext
    orders: asyncio.Task[None]  # the cluster's OrderRunner


class SkyletManager:
    """``selector``: serve only the clusters whose ``metadata.labels`` match (all when empty),
    so a manager on another host never runs the replicas of a cluster that lives here."""

    def __init__(self, client: Client, store: ObjectStore, sync: SyncConfig | None = None,
                 selector: Selector | None = None) -> None:
        self.client = client
        self.store = store
        self.sync = sync or SyncConfig()
        self.selector = selector or Selector()
        self.skylets: dict[str, Skylet] = {}
        self._preparing: set[asyncio.Task[None]] = set()  # managers' prepare(), in the background

    async def run(self, stop: asyncio.Event, ready: Path | None = None) -> None:
        """Follow the Clusters in etcd until ``stop`` is set."""
        watcher = asyncio.create_task(self._follow(ready))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({watcher, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (watcher, stopper):
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await asyncio.gather(*(self._stop(n) for n in list(self.skylets)))
            if ready is not None:
                clear_ready(ready)

    async def _follow(self, ready: Path | None) -> None:
        while True:
            try:
                listing = await self.store.list("clusters")
                names = set()
                for obj in listing.items:
                    names.add(str(obj["metadata"]["name"]))
                    await self._apply(obj)
                for name in set(self.skylets) - names:
                    await self._stop(name)
                if ready is not None:
                    mark_ready(ready)
                rev = listing.resource_version
                async for ev in self.store.watch("clusters", from_revision=rev):
                    if ev.type == "DELETED":
                        await self._stop(str(ev.object["metadata"]["name"]))
                    else:
                        await self._apply(ev.object)
            except StoreError as exc:  # Expired or etcd away: list again
                log.warning("cluster watch interrupted: %s", exc)
                await asyncio.sleep(1.0)
            except Exception:  # a bug must not stop every skylet of this manager: log, relist
                log.exception("cluster watch failed; listing again")
                await asyncio.sleep(1.0)

    async def _apply(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        if not self.selector.matches(meta.get("labels") or {}):
            if name in self.skylets:  # relabelled away from this manager
                log.info("cluster %s no longer matches %s: handing it over", name, self.selector)
                await self._stop(name)
            return
        # a provisioned cluster's skylet is rebuilt when its SkyPilot clusters change too
        sky = tuple(((obj.get("status") or {}).get("provision") or {}).get("skyClusters") or [])
        key = (str(meta.get("uid") or ""), int(meta.get("generation") or 0), sky)
        current = self.skylets.get(name)
        if current is not None and current.key == key:
            return
        # built before the old one stops: what the old manager holds (a SkyPilot runner) is
        # then taken over, not ended and started again
        ctx = ClusterContext(name, build_manager(obj))
        started = asyncio.create_task(prepare(ctx.manager))  # e.g. SkyPilot's import, now
        self._preparing.add(started)
        started.add_done_callback(self._preparing.discard)
        if current is not None:
            await self._stop(name)
        acts = SkyletWithSync(ctx, self.store, self.client, sync=self.sync)
        svc = ServiceActivities(ctx)
        worker = Worker(
            self.client,
            task_queue=skylet_queue(name),
            activities=[acts.sync_cluster, acts.submit_replicas, acts.delete_replicas,
                        acts.teardown_cluster, acts.replica_op, svc.apply_service,
                        svc.delete_service, svc.replica_addresses, PROBES.probe_tcp],
            max_concurrent_activities=256,
            max_concurrent_activity_task_polls=4,
            graceful_shutdown_timeout=timedelta(seconds=2),
        )
        task = asyncio.create_task(worker.run())
        orders = start_runner(acts)  # the submit orders of the job workflows (activities.orders)
        self.skylets[name] = Skylet(key, worker, task, ctx, orders)
        log.info("skylet for cluster %s polling %s", name, skylet_queue(name))

    async def _stop(self, name: str) -> None:
        skylet = self.skylets.pop(name, None)
        if skylet is None:
            return
        skylet.orders.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await skylet.orders
        with contextlib.suppress(Exception):
            await skylet.worker.shutdown()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await skylet.task
        with contextlib.suppress(Exception):
            await skylet.ctx.manager.close()
        log.info("skylet for cluster %s stopped", name)


async def main() -> None:
    setup_logging()
    payload_hints.install()  # decode payloads without re-resolving type hints each time
    settings = Settings.from_env()
    stop = stop_event()
    try:
        selector = parse_selector(os.environ.get(SELECTOR_ENV, ""))
    except InvalidSelector as exc:
        raise SystemExit(f"{SELECTOR_ENV}: {exc}") from None
    runtime, metrics = start_from_env()
    try:
        client = await connect_temporal(settings, stop, runtime=runtime)
        store = await connect_store(settings, stop)
    except asyncio.CancelledError:
        return
    sync = SyncConfig(
        interval=env_float("SKYSHIFT_SYNC_INTERVAL", 1.0),
        lost_after=env_float("SKYSHIFT_LOST_AFTER", 5.0),
        orphan_sweep=env_float("SKYSHIFT_ORPHAN_SWEEP", 60.0),
    )
    try:
        await SkyletManager(client, store, sync, selector).run(
            stop, ready_path(settings, "skylet_manager"))
    finally:
        await store.close()
        if metrics is not None:
            metrics.stop()


if __name__ == "__main__":
    asyncio.run(main())
