"""Locks per key for the skylet: a job's submit orders and deletes, one at a time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable


class KeyedLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def holding(self, keys: Iterable[str]) -> AsyncIterator[None]:
        """Hold the locks of ``keys`` (taken in sorted order: no deadlock between holders)."""
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                await stack.enter_async_context(self._one(key))
            yield

    @contextlib.asynccontextmanager
    async def _one(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def lock_key_of(replica_name: str) -> str:
    """The job (its uid8) a replica named ``<job>-<uid8>-<rank>`` belongs to."""
    parts = replica_name.rsplit("-", 2)
    return parts[1] if len(parts) == 3 else replica_name
