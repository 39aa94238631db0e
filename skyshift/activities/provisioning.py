"""Provisioning activities (control task queue): launch and tear down a Cluster's SkyPilot
clusters through a :class:`~skyshift.compat.provision_types.Provisioner`, and report progress.

The provisioner's calls block (SkyPilot's SDK does), so each runs in a thread while the activity
heartbeats and writes the provisioner's latest progress line to the Cluster's status (at most
once a second). Errors map onto the workflow's decisions: ``Capacity`` -> a retryable
ApplicationError of type ``Capacity`` (retried with backoff, then the workflow fails over to the
next infra), ``Permanent`` -> non-retryable (the Cluster ends Failed with that message),
``Transient`` -> retried. A cancelled launch still waits for its thread to return, so a teardown
that follows never races a launch still in flight (nothing is leaked by deleting a Cluster
while it provisions).

Which provisioner the worker holds comes from :func:`get_provisioner`: the one a manager's
descriptor names (``provisioner``, SkyPilot's), imported lazily like compat's adapters; tests
register a fake with :func:`register_provisioner`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyshift.activities.store import uid_of, update_status
from skyshift.activities.trust import check_names, check_ref, untrusted
from skyshift.compat.errors import CompatError, Transient
from skyshift.compat.kind import load, manager_kind
from skyshift.compat.provision_types import Capacity, Provisioner
from skyshift.contract import activity_names as act
from skyshift.contract.provision import (
    DownInput,
    LaunchInput,
    LaunchResult,
    UsageInput,
    UsageResult,
    expected_seconds,
    launch_request,
)
from skyshift.models.base import Obj
from skyshift.models.cluster_provision import check_infra
from skyshift.models.job import TERMINAL_PHASES
from skyshift.models.quantity import parse_accelerators
from skyshift.store import ObjectStore

log = logging.getLogger(__name__)
ProvisionerFactory = Callable[[], Provisioner]

_REGISTRY: dict[str, ProvisionerFactory] = {}
WRITE_EVERY = 1.0  # seconds between two progress writes
BEAT_EVERY = 1.0  # also how soon the first progress line is written


def register_provisioner(name: str, factory: ProvisionerFactory) -> None:
    """Make ``get_provisioner(name)`` build with ``factory`` (plugins, tests)."""
    _REGISTRY[name] = factory


def get_provisioner(name: str = "skypilot") -> Provisioner:
    """The provisioner of manager ``name`` (a registered factory first)."""
    factory = _REGISTRY.get(name)
    if factory is None:
        kind = manager_kind(name)
        if kind is None or not kind.provisioner:
            raise KeyError(f"unknown provisioner {name!r}")
        factory = load(kind.provisioner)
        _REGISTRY[name] = factory
    return factory()


def warm_provisioner(name: str = "skypilot") -> None:
    """Get manager ``name``'s provisioner ready ahead of this process's first launch, best effort
    (blocking: run it in a thread). SkyPilot's driver starts its runner, which imports SkyPilot
    (about 3 s, 157 MB) before it answers: without this the first provisioned Cluster after a
    start waited for that inside its launch. A provisioner without ``warm()``, or one that is not
    installed or cannot start, is left to the first launch, which says what is wrong."""
    try:
        warm = getattr(get_provisioner(name), "warm", None)
        if warm is not None:
            warm()
    except Exception as exc:  # a launch reports it; the worker runs on without
        log.info("provisioner %s not warmed: %s", name, exc)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _provision_block(obj: Obj) -> dict[str, Any]:
    status = obj.setdefault("status", {})
    block = status.get("provision")
    if not isinstance(block, dict):
        block = status["provision"] = {}
    out: dict[str, Any] = block
    return out



def check_launch(inp: LaunchInput) -> None:
    """What a launch puts on SkyPilot's command line and in its task: names, infra, sizes."""
    check_ref(inp.cluster, None, inp.uid, "cluster")
    check_names([inp.sky_cluster, *inp.groups], "SkyPilot cluster")
    check_infra(inp.infra, "infra")
    parse_accelerators(inp.accelerators)
    for what, number in (("nodes", inp.nodes), ("cpus", inp.cpus), ("memory", inp.memory_mb)):
        if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
            raise ValueError(f"{what} must be a non-negative number")

class ProvisioningActivities:
    """Built once in the control worker with its store; the provisioner is built on first use
    (a worker that never provisions never imports SkyPilot)."""

    def __init__(self, store: ObjectStore, provisioner: str | Provisioner = "skypilot") -> None:
        self.store = store
        self._provisioner = provisioner

    @property
    def provisioner(self) -> Provisioner:
        if isinstance(self._provisioner, str):
            self._provisioner = get_provisioner(self._provisioner)
        return self._provisioner

    async def _write(self, name: str, uid: str, change: Callable[[Obj], None]) -> None:
        def mutate(obj: Obj) -> Obj | None:
            if uid and uid_of(obj) != uid:
                return None
            before = repr(obj.get("status"))
            change(obj)
            return obj if repr(obj.get("status")) != before else None

        await update_status(self.store, "clusters", name, None, mutate)

    def _phase(self, obj: Obj, phase: str, message: str) -> None:
        status = obj.setdefault("status", {})
        if (obj.get("metadata") or {}).get("deletionTimestamp") and phase != "Terminating":
            return  # being deleted: the teardown's phase stands
        status["phase"], status["message"] = phase, message

    async def _call(self, fn: Callable[[Callable[[str], None]], Any], name: str, uid: str) -> Any:
        """Run ``fn(progress)`` in a thread; heartbeat, and write progress lines to status.
        Cancellation waits for the thread (the provisioner's call cannot be interrupted)."""
        latest: list[str] = []
        task = asyncio.ensure_future(asyncio.to_thread(fn, latest.append))
        watcher = asyncio.ensure_future(self._watch(task, latest, name, uid))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            while not task.done():  # the thread runs on: let it finish before reporting
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({task})
            if (exc := task.exception()) is not None:
                log.info("%s: a cancelled provisioner call ended with %s", name, exc)
            raise
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    async def _watch(self, task: asyncio.Future[Any], latest: list[str], name: str,
                     uid: str) -> None:
        written, last_write = "", 0.0
        while not task.done():
            await asyncio.wait({task}, timeout=BEAT_EVERY)
            line = latest[-1][:500] if latest else ""
            activity.heartbeat(line)
            if task.done() or line == written or time.monotonic() - last_write < WRITE_EVERY:
                continue
            written, last_write = line, time.monotonic()

            def progress(obj: Obj, line: str = line) -> None:
                _provision_block(obj)["message"] = line
                if obj.get("status", {}).get("phase") in ("Provisioning", "Scaling"):
                    obj["status"]["message"] = line

            with contextlib.suppress(Exception):  # progress is best effort
                await self._write(name, uid, progress)

    @activity.defn(name=act.PROVISION_CLUSTER)
    async def provision_cluster(self, inp: LaunchInput) -> LaunchResult:
        """Launch (or adopt) one SkyPilot cluster of the Cluster; UP when it returns."""
        with untrusted(act.PROVISION_CLUSTER):
            check_launch(inp)
        attempt = activity.info().attempt
        total = inp.attempts_before + attempt
        eta = datetime.now(UTC) + timedelta(seconds=expected_seconds(inp.infra))
        what = f"launching {inp.sky_cluster} ({inp.nodes} node(s)) on {inp.infra}"
        if attempt > 1:
            what += f", attempt {attempt}"

        def starting(obj: Obj) -> None:
            self._phase(obj, inp.phase, what)
            block = _provision_block(obj)
            block.update(infra=inp.infra, attempts=total, eta=_iso(eta), message=what,
                         skyClusters=list(inp.groups), nodes=sum(inp.groups.values()))

        await self._write(inp.cluster, inp.uid, starting)
        req = launch_request(inp)
        try:
            up = await self._call(lambda p: self.provisioner.launch(req, p), inp.cluster, inp.uid)
        except CompatError as exc:
            msg = f"{inp.infra}: {exc}"

            def failed(obj: Obj) -> None:
                _provision_block(obj).update(lastError=msg[:2000], eta=None)

            await self._write(inp.cluster, inp.uid, failed)
            if isinstance(exc, Capacity):
                raise ApplicationError(msg, type="Capacity") from exc
            if isinstance(exc, Transient):
                raise
            raise ApplicationError(msg, type=type(exc).__name__, non_retryable=True) from exc
        nodes = up.nodes or inp.nodes
        groups = {**inp.groups, inp.sky_cluster: nodes}

        def launched(obj: Obj) -> None:
            block = _provision_block(obj)
            block.update(skyClusters=list(groups), nodes=sum(groups.values()), eta=None,
                         infra=inp.infra, message=f"{inp.sky_cluster} is UP on {inp.infra}")

        await self._write(inp.cluster, inp.uid, launched)
        return LaunchResult(inp.sky_cluster, nodes, attempt)

    @activity.defn(name=act.UNPROVISION_CLUSTER)
    async def unprovision_cluster(self, inp: DownInput) -> int:
        """Tear down the named SkyPilot clusters (absent ones are fine); returns how many."""
        with untrusted(act.UNPROVISION_CLUSTER):
            check_ref(inp.cluster, None, inp.uid, 'cluster')
            check_names(inp.sky_clusters, 'SkyPilot cluster')
            check_names(inp.groups, 'SkyPilot cluster')

        def starting(obj: Obj) -> None:
            if inp.phase:
                self._phase(obj, inp.phase, f"tearing down {', '.join(inp.sky_clusters)}")

        await self._write(inp.cluster, inp.uid, starting)
        # all at once: each `sky down` takes about as long as a launch's teardown (tens of
        # seconds), one after the other a cluster of N groups took N times that to go
        downs = [self._call(partial(self.provisioner.down, sky), inp.cluster, inp.uid)
                 for sky in inp.sky_clusters]
        results = await asyncio.gather(*downs, return_exceptions=True)
        for sky, exc in zip(inp.sky_clusters, results, strict=True):
            if isinstance(exc, CompatError):  # retried by the workflow's policy: say why
                msg = f"cannot tear down {sky}: {exc}"[:2000]

                def failed(obj: Obj, msg: str = msg) -> None:
                    _provision_block(obj)["lastError"] = msg
                    if inp.phase:
                        obj.setdefault("status", {})["message"] = msg + " (retrying)"

                await self._write(inp.cluster, inp.uid, failed)
                raise exc
            if isinstance(exc, BaseException):
                raise exc

        def done(obj: Obj) -> None:
            _provision_block(obj).update(skyClusters=list(inp.groups),
                                         nodes=sum(inp.groups.values()), eta=None)

        await self._write(inp.cluster, inp.uid, done)
        return len(inp.sky_clusters)

    @activity.defn(name=act.CLUSTER_USAGE)
    async def cluster_usage(self, inp: UsageInput) -> UsageResult:
        """Unfinished SkyShift replicas placed on the cluster, and jobs waiting for it to grow
        (from the jobs' status): what decides whether a provisioned cluster is idle."""
        with untrusted(act.CLUSTER_USAGE):
            check_ref(inp.cluster, what='cluster')
        count = 0
        for obj in (await self.store.list("jobs")).items:
            status = obj.get("status") or {}
            if status.get("phase") in TERMINAL_PHASES:
                continue
            placed = int((status.get("placement") or {}).get(inp.cluster) or 0)
            counts = (status.get("replicaStatus") or {}).get(inp.cluster) or {}
            live = sum(int(n) for s, n in counts.items() if s not in TERMINAL_PHASES)
            # a job waiting for this cluster to grow keeps it too
            waits = f"provisioning {inp.cluster} (" in str(status.get("message") or "")
            count += max(placed, live, int(waits))
        return UsageResult(count)
