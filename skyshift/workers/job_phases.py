"""``skyshift_jobs`` (jobs by phase) kept equal to etcd as jobs change, not once per pass.

The control worker lists the jobs once (page by page, one snapshot) and then follows a watch of
them from that snapshot's revision: each ADDED, MODIFIED or DELETED event moves one job between
phases and the gauge is set at once, so a scrape right after a job changes phase shows it. When
the watch ends (etcd away too long, or its revision compacted) it lists again and watches anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from typing import Any

from skyshift.metrics import set_job_phases
from skyshift.store import ObjectStore
from skyshift.store.errors import StoreError
from skyshift.store.watch import WatchEvent

log = logging.getLogger(__name__)
PAGE = 500


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _phase(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or "Pending")


class JobPhases:
    """The phase of every job, and the gauge set from their counts after each change."""

    def __init__(self, store: ObjectStore, retry: float = 2.0) -> None:
        self.store = store
        self.retry = retry
        self.phases: dict[str, str] = {}
        self.counts: Counter[str] = Counter()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._follow()
            except StoreError as exc:  # etcd away too long, or compacted: list again
                log.warning("job phase watch: %s; listing again in %gs", exc, self.retry)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.retry)

    async def _follow(self) -> None:
        revision = await self._load()
        async for event in self.store.watch("jobs", from_revision=revision):
            self.apply(event)

    async def _load(self) -> str:
        """Every job's phase at one snapshot; returns that snapshot's revision."""
        self.phases, token, revision = {}, None, ""
        while True:
            page = await self.store.list("jobs", limit=PAGE, continue_token=token)
            revision = revision or page.resource_version
            self.phases.update((_key(obj), _phase(obj)) for obj in page.items)
            token = page.continue_token
            if not token:
                break
        self.counts = Counter(self.phases.values())
        set_job_phases(self.counts)
        return revision

    def apply(self, event: WatchEvent) -> None:
        """Move one job to its new phase (or out, when deleted) and set the gauge."""
        key = _key(event.object)
        old = self.phases.pop(key, None)
        if old is not None:
            self.counts[old] -= 1
        if event.type != "DELETED":
            new = self.phases[key] = _phase(event.object)
            self.counts[new] += 1
        set_job_phases(self.counts)
