"""Concurrency for the Slurm adapter: submits side by side, deletes alone, lookups shared.

The adapter used to serialise every submit behind one lock and read the whole queue each time,
which capped a burst at a few submits a second. What idempotency really needs is narrower:

* two submits of the *same* replica name must not both decide "not there yet" -> one lock per
  name (:class:`skyshift.compat.common.name_locks.NameLocks`);
* a delete must not interleave with submits (it cancels, then removes records) -> :class:`Gate`:
  submits share it, a delete takes it alone, in arrival order (neither starves the other);
* concurrent submits each need a fresh look at their names -> :class:`Coalescer` runs one lookup
  for the union of the names waiting while the previous lookup ran. Every caller's lookup starts
  after it asked (and so after it took its name lock), so what it sees is never stale.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Gate:
    """Shared/exclusive gate admitting waiters in arrival order: sharers that queue up
    together run together, an exclusive holder waits for those before it and holds back those
    after it, so neither a stream of submits nor a stream of deletes starves the other."""

    def __init__(self) -> None:
        self._queue: deque[tuple[bool, asyncio.Future[None]]] = deque()
        self._shared = 0
        self._exclusive = False

    def _admit(self) -> None:
        while self._queue:
            exclusive, fut = self._queue[0]
            if fut.done():  # its waiter was cancelled
                self._queue.popleft()
                continue
            if self._exclusive or (exclusive and self._shared):
                return
            self._queue.popleft()
            if exclusive:
                self._exclusive = True
            else:
                self._shared += 1
            fut.set_result(None)
            if exclusive:
                return

    def _release(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = False
        else:
            self._shared -= 1
        self._admit()

    @contextlib.asynccontextmanager
    async def _hold(self, exclusive: bool) -> AsyncIterator[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((exclusive, fut))
        self._admit()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted, then cancelled: pass it on
                self._release(exclusive)
            else:
                self._admit()
            raise
        try:
            yield
        finally:
            self._release(exclusive)

    def shared(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._hold(False)

    def exclusive(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._hold(True)


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
