"""One asyncio lock per replica name, for adapters whose submit must be idempotent by name.

Two submits of the same replica name must not both decide "not there yet" and create it twice;
submits of different names must not wait for each other. The Slurm and Ray adapters both hold
these around their look-then-create.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class NameLocks:
    """One lock per name, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, names: list[str]) -> AsyncIterator[None]:
        """All of ``names``, taken in sorted order (no deadlock between overlapping sets)."""
        ordered = sorted(set(names))
        for name in ordered:
            self._users[name] = self._users.get(name, 0) + 1
            self._locks.setdefault(name, asyncio.Lock())
        taken: list[str] = []
        try:
            for name in ordered:
                await self._locks[name].acquire()
                taken.append(name)
            yield
        finally:
            for name in taken:
                self._locks[name].release()
            for name in ordered:
                self._users[name] -= 1
                if not self._users[name]:
                    del self._users[name], self._locks[name]
