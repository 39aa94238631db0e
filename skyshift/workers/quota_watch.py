"""Keep every Quota's ``status.used`` current, and retry quota-blocked jobs when room frees.

The scheduler reads a namespace's usage afresh from etcd in each round, so this task is not
what enforces a quota. It is what users see (``skyctl get quotas``) and what wakes the
scheduler: a job that waits for quota can be admitted only after another job of its namespace
ends, is scaled down or is removed, or after a quota changes, and none of those is a capacity
signal the scheduler would get in time (a cluster's capacity may be reported before the ended
job's phase is written). So it watches Quotas and, in the namespaces that have one, their jobs;
per burst of changes it rewrites the affected quotas' usage and, when anything was freed or a
quota changed, sends the scheduler one ``rules_changed`` signal.

A plain asyncio task of the control worker, like the rules watch: nothing in it needs to be
durable (a restart lists everything again), and two control workers doing it is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from skyshift.activities.quotas import namespace_usage, per_replica_of, replicas_held
from skyshift.metrics import QUOTA_HARD, QUOTA_USED
from skyshift.models.base import Obj, ns_name
from skyshift.store import ObjectStore
from skyshift.store.errors import NotFound, StoreError
from skyshift.store.watch import WatchEvent
from skyshift.workers.common import first_to_end
from skyshift.workers.rules_watch import Notify

log = logging.getLogger(__name__)


def holding(obj: Obj) -> tuple[int, str]:
    """What of a job counts for quota: replicas held, and the request they are held for."""
    return replicas_held(obj), repr(per_replica_of(obj))


class QuotaNamespacesChanged(Exception):
    """A namespace gained its first Quota or lost its last: watch another set of namespaces."""


class QuotaWatch:
    def __init__(
        self, store: ObjectStore, notify: Notify, *, debounce: float = 0.2, retry: float = 2.0
    ) -> None:
        self.store, self.notify = store, notify
        self.debounce, self.retry = debounce, retry
        self.quotas: dict[str, set[str]] = {}  # namespace -> its quotas' names
        self.jobs: dict[str, tuple[int, str]] = {}  # "ns/name" -> holding()
        self.dirty: set[str] = set()
        self.freed = False
        self._wake = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        flusher = asyncio.create_task(self._flush_loop(stop))
        try:
            while not stop.is_set():
                try:
                    await self._watch()
                except QuotaNamespacesChanged:
                    continue
                except StoreError as exc:
                    log.warning("quota watch: %s; watching again in %gs", exc, self.retry)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.retry)
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher

    async def _watch(self) -> None:
        page = await self.store.list("quotas")
        self.quotas = {}
        for obj in page.items:
            meta = obj.get("metadata") or {}
            self.quotas.setdefault(str(meta.get("namespace")), set()).add(str(meta.get("name")))
        rev = page.resource_version
        self.jobs = {}
        for ns in self.quotas:
            for obj in (await self.store.list("jobs", ns)).items:
                self.jobs[ns_name(obj)] = holding(obj)
        self._mark(set(self.quotas), freed=True)  # whatever happened while not watching
        # the first stream to end (a quota namespace added or gone, etcd away) ends them all
        await first_to_end(
            self._quota_events(self.store.watch("quotas", from_revision=rev)),
            *(self._job_events(self.store.watch("jobs", ns, from_revision=rev))
              for ns in sorted(self.quotas)),
        )

    async def _quota_events(self, events: AsyncIterator[WatchEvent]) -> None:
        async for ev in events:
            meta = ev.object.get("metadata") or {}
            ns, name = str(meta.get("namespace")), str(meta.get("name"))
            names = self.quotas.get(ns, set())
            had = bool(names)
            if ev.type == "DELETED":
                names.discard(name)
            else:
                names.add(name)
            self.quotas[ns] = names
            self._mark({ns}, freed=True)
            if had != bool(names):
                if not names:
                    del self.quotas[ns]
                raise QuotaNamespacesChanged(ns)

    async def _job_events(self, events: AsyncIterator[WatchEvent]) -> None:
        async for ev in events:
            key = ns_name(ev.object)
            now = (0, "") if ev.type == "DELETED" else holding(ev.object)
            before = self.jobs.get(key, (0, ""))
            if now == before:
                continue
            if now[0] == 0:
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = now
            self._mark({key.split("/", 1)[0]}, freed=now[0] < before[0])

    def _mark(self, namespaces: set[str], *, freed: bool) -> None:
        self.dirty |= namespaces
        self.freed = self.freed or freed
        self._wake.set()

    async def _flush_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._wake.wait()
            await asyncio.sleep(self.debounce)  # one write per quota per burst
            self._wake.clear()
            dirty, self.dirty = self.dirty, set()
            freed, self.freed = self.freed, False
            try:
                for ns in sorted(dirty):
                    await self._write_usage(ns)
                if freed:
                    await self.notify("quota room may have freed")
            except Exception as exc:  # etcd or Temporal away: try the same again later
                log.warning("quota usage not written yet: %s", exc)
                self._mark(dirty, freed=freed)
                await asyncio.sleep(self.retry)

    async def _write_usage(self, ns: str) -> None:
        names = self.quotas.get(ns)
        if not names:
            return
        used = namespace_usage((await self.store.list("jobs", ns)).items, {})
        for name in sorted(names):
            await self._set_used(ns, name, used)

    async def _set_used(self, ns: str, name: str, used: dict[str, float]) -> None:
        def mutate(obj: Obj) -> Obj | None:
            hard = (obj.get("spec") or {}).get("hard") or {}
            shown = {k: round(used.get(k, 0.0), 6) for k in hard}
            borrowed = {k: round(v - hard[k], 6) for k, v in shown.items() if v > hard[k]}
            status = dict(obj.get("status") or {})
            if status.get("used") == shown and (status.get("borrowed") or {}) == borrowed:
                return None
            status["used"], status["borrowed"] = shown, borrowed
            return {**obj, "status": status}

        with contextlib.suppress(NotFound):
            obj = await self.store.guaranteed_update("quotas", name, ns, mutate)
            export(ns, name, (obj.get("spec") or {}).get("hard") or {}, used)


def export(ns: str, name: str, hard: dict[str, float], used: dict[str, float]) -> None:
    """``skyshift_quota_used`` / ``skyshift_quota_hard`` for one quota."""
    for key, limit in hard.items():
        QUOTA_HARD.labels(ns, name, key).set(float(limit))
        QUOTA_USED.labels(ns, name, key).set(used.get(key, 0.0))

