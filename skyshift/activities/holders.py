"""The jobs holding replicas, kept by the control worker between the scheduler's rounds.

Preemption looks for victims among every job that holds replicas (:func:`preemption.holding`).
A round read them by listing every Job in etcd, and decoding each: in a profile of the control
worker while 500 jobs waited for a Slurm cluster's slots (bench/slurm.py, py-spy), that list was
14 % of the worker's samples, since a round with a job waiting that may preempt lists them all
again. :class:`Holders` reads all of them once and afterwards only the jobs modified since its
last read (:func:`skyshift.store.changed_since`: etcd filters by modification revision, so an
unchanged job is neither sent nor decoded). A deletion has no revision to filter on: when etcd
counts fewer jobs than it holds, it reads them all again. Every read is exact (as of its
snapshot), as the full list was.
"""

from __future__ import annotations

import asyncio

from skyshift.activities.preemption import holding
from skyshift.models.base import ns_name
from skyshift.scheduler.preempt import Running
from skyshift.store import Expired, ObjectStore, changed_since


class Holders:
    """Every Job by key, as a preemption candidate (None: it holds nothing now)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._jobs: dict[str, Running | None] = {}
        self._revision = 0  # of the last read; 0: read everything
        self._count = 0  # how many jobs etcd counted then
        self._lock = asyncio.Lock()
        self.decoded = 0  # jobs read and decoded in all (what the tests check)

    async def read(self) -> list[Running]:
        """The jobs holding replicas now, as etcd shows them at one snapshot."""
        async with self._lock:
            try:
                await self._catch_up()
            except Expired:  # the snapshot of a read in batches was compacted: start over
                self._revision = 0
                await self._catch_up()
            return [r for r in self._jobs.values() if r is not None]

    async def _catch_up(self) -> None:
        await self._apply(self._revision)
        if len(self._jobs) != self._count:  # some were deleted since: read them all again
            await self._apply(0)

    async def _apply(self, after: int) -> None:
        changes = await changed_since(self.store, "jobs", after)
        if not after:
            self._jobs = {}
        self.decoded += len(changes.items)
        for obj in changes.items:
            self._jobs[ns_name(obj)] = holding(obj)
        self._revision, self._count = changes.revision, changes.count
