"""Tell the scheduler when placement rules change, so pending jobs are re-placed at once.

The scheduler retries a queued job only when something could make it fit: capacity freed, a
reservation released, or the rules it was judged by changed. Capacity comes from the skylets;
the rules are FilterPolicies and cluster labels (the user's ``metadata.labels`` and the labels the
adapter reports in ``status.labels``), which anyone may change through the API. This task watches
both in etcd and sends the scheduler one ``rules_changed`` signal per burst of changes, so a job
blocked by a policy naming a cluster that does not exist is placed as soon as the policy is fixed,
not whenever capacity happens to change next.

It is a plain asyncio task in the control worker, like the reconciler: it keeps no state worth
making durable (a restart lists the clusters again), and two control workers both signalling is
harmless (one extra placement round). Cluster status is written often (capacity, heartbeats); only
a change of labels or phase counts, compared against the last seen fingerprint of each cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from skyshift.store import ObjectStore
from skyshift.store.errors import StoreError
from skyshift.store.watch import WatchEvent
from skyshift.workers.common import first_to_end

log = logging.getLogger(__name__)

Notify = Callable[[str], Awaitable[None]]


def cluster_fingerprint(obj: dict[str, Any]) -> str:
    """What placement rules read of a cluster: its labels (both kinds) and its phase."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return json.dumps(
        [meta.get("labels") or {}, status.get("labels") or {}, status.get("phase") or ""],
        sort_keys=True,
    )


class ClusterRules:
    """The last fingerprint of every cluster; says whether an event changed placement rules."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def load(self, items: list[dict[str, Any]]) -> None:
        self.seen = {
            str((o.get("metadata") or {}).get("name")): cluster_fingerprint(o) for o in items
        }

    def changed(self, event: WatchEvent) -> bool:
        name = str((event.object.get("metadata") or {}).get("name"))
        if event.type == "DELETED":
            return self.seen.pop(name, None) is not None
        fp = cluster_fingerprint(event.object)
        before = self.seen.get(name)
        self.seen[name] = fp
        return before != fp


class RulesWatch:
    """Watch FilterPolicies and Clusters; call ``notify`` once per burst of rule changes."""

    def __init__(self, store: ObjectStore, notify: Notify, *, debounce: float = 0.2,
                 retry: float = 2.0) -> None:
        self.store = store
        self.notify = notify
        self.debounce = debounce
        self.retry = retry
        self.clusters = ClusterRules()
        self._dirty = asyncio.Event()
        self._what = ""

    async def run(self, stop: asyncio.Event) -> None:
        sender = asyncio.create_task(self._send(stop))
        try:
            while not stop.is_set():
                try:
                    await self._watch()
                except StoreError as exc:  # etcd away too long, or compacted: start again
                    log.warning("rules watch: %s; watching again in %gs", exc, self.retry)
                    # a change may have been missed meanwhile: let the scheduler look again
                    self._mark("rules watch restarted")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.retry)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    def _mark(self, what: str) -> None:
        self._what = what
        self._dirty.set()

    async def _watch(self) -> None:
        page = await self.store.list("clusters")
        self.clusters.load(page.items)
        rev = page.resource_version
        policies = self.store.watch("filterpolicies", from_revision=rev)
        clusters = self.store.watch("clusters", from_revision=rev)
        await first_to_end(self._policies(policies), self._clusters(clusters))

    async def _policies(self, events: Any) -> None:
        async for ev in events:
            meta = ev.object.get("metadata") or {}
            self._mark(f"FilterPolicy {meta.get('namespace')}/{meta.get('name')} {ev.type}")

    async def _clusters(self, events: Any) -> None:
        async for ev in events:
            if self.clusters.changed(ev):
                name = (ev.object.get("metadata") or {}).get("name")
                self._mark(f"Cluster {name} labels/phase {ev.type}")

    async def _send(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._dirty.wait()
            await asyncio.sleep(self.debounce)  # one signal for a burst (e.g. `apply -f`)
            self._dirty.clear()
            what = self._what
            try:
                await self.notify(what)
                log.info("scheduler told: %s", what)
            except Exception as exc:  # Temporal away: keep it dirty and try again
                log.warning("could not tell the scheduler (%s): %s", what, exc)
                self._dirty.set()
                await asyncio.sleep(self.retry)
