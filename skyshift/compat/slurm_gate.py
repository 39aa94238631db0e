"""Concurrency for the Slurm adapter: submits side by side, deletes alone, lookups shared.

The adapter used to serialise every submit behind one lock and read the whole queue each time,
which capped a burst at a few submits a second. What idempotency really needs is narrower:

* two submits of the *same* replica name must not both decide "not there yet" -> one lock per
  name (:class:`NameLocks`);
* a delete must not interleave with submits or listings (it cancels, then removes records) ->
  :class:`Gate`: submits and listings share it, a delete takes it alone; a waiting delete stops
  new sharers so a steady stream of submits cannot starve it;
* concurrent submits each need a fresh look at their names -> :class:`Coalescer` runs one lookup
  for the union of the names waiting while the previous lookup ran. Every caller's lookup starts
  after it asked (and so after it took its name lock), so what it sees is never stale.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Gate:
    """Shared/exclusive gate; a waiting exclusive holder blocks new shared ones."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0  # exclusive holders waiting

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            async with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._cond:
            self._waiting += 1
            try:
                await self._cond.wait_for(lambda: not self._exclusive and not self._shared)
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            async with self._cond:
                self._exclusive = False
                self._cond.notify_all()


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


class Coalescer(Generic[T]):
    """``get(names)`` -> ``fetch(union of names asked meanwhile)``; one fetch at a time."""

    def __init__(self, fetch: Callable[[list[str]], Awaitable[T]]) -> None:
        self._fetch = fetch
        self._names: set[str] = set()
        self._next: asyncio.Future[T] | None = None
        self._runner: asyncio.Task[None] | None = None

    async def get(self, names: list[str]) -> T:
        self._names.update(names)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        fut = self._next
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await asyncio.shield(fut)

    async def _run(self) -> None:
        while self._next is not None:
            fut, names = self._next, sorted(self._names)
            self._next, self._names = None, set()
            try:
                fut.set_result(await self._fetch(names))
            except asyncio.CancelledError:
                fut.cancel()
                raise
            except Exception as exc:  # every caller of this round gets the error
                fut.set_exception(exc)
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                fut.exception()  # retrieved: no "never retrieved" warning when all gave up
