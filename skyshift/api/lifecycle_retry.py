"""Lifecycle notifications that failed because Temporal was away, sent again in the background.

When Temporal cannot be reached, a create still answers 201 (the object is in etcd) but its
workflow is not started. Left to the reconciler, the lifecycle would start up to a grace period
plus a pass interval (about 45 s) after Temporal is back; :class:`Redelivery` instead keeps the
failed notification and tries it again with backoff (``first`` doubling up to ``cap`` seconds),
so it goes through within a few seconds of Temporal's return.

It is bounded, not durable: at most ``max_objects`` objects wait, each for at most
``give_up_after`` seconds, and a crash of the API server forgets them. All of that is safe,
because the reconciler in the control worker remains the safety net (it is also woken when
Temporal comes back, see :mod:`skyshift.workers.temporal_watch`).

Order is kept per object: while an object has notifications waiting, newer ones for it wait
behind them (a ``deleting`` never overtakes the ``created`` it follows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means "Temporal did not answer" (worth retrying), not "refused"."""
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, RPCError):
        return exc.status in (
            RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED,
            RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.UNKNOWN, RPCStatusCode.CANCELLED,
        )
    # connection failures of the client itself ("Failed client connect: ...") and sockets
    return isinstance(exc, OSError | TimeoutError | ConnectionError) or (
        type(exc) is RuntimeError and "connect" in str(exc).lower()
    )


@dataclass
class _Waiting:
    """The notifications one object has waiting, oldest first."""

    items: list[tuple[str, Send, dict[str, Any]]] = field(default_factory=list)
    since: float = field(default_factory=time.monotonic)


class Redelivery:
    """Failed lifecycle notifications and the background task that sends them again."""

    def __init__(self, *, probe: Callable[[], Awaitable[bool]] | None = None,
                 first: float = 0.25, cap: float = 2.0, give_up_after: float = 600.0,
                 max_objects: int = 10_000) -> None:
        """``probe``: a cheap "is Temporal answering?" asked before each round, so a round
        while it is away costs one health check rather than a call that waits out the
        client's own retries."""
        self.probe = probe
        self.first = first
        self.cap = cap
        self.give_up_after = give_up_after
        self.max_objects = max_objects
        self._waiting: dict[str, _Waiting] = {}
        self._task: asyncio.Task[None] | None = None
        #: notifications delivered by a retry, and dropped (permanent error, too old, too many)
        self.delivered = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def holds(self, key: str) -> bool:
        """Whether ``key`` has notifications waiting (a new one must queue behind them)."""
        return key in self._waiting

    def add(self, key: str, what: str, send: Send, obj: dict[str, Any]) -> bool:
        """Keep ``send(obj)`` for a retry; False when full (the reconciler will do it)."""
        waiting = self._waiting.get(key)
        if waiting is None:
            if len(self._waiting) >= self.max_objects:
                self.dropped += 1
                return False
            waiting = self._waiting[key] = _Waiting()
        waiting.items.append((what, send, obj))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = self.first
        while self._waiting:
            await asyncio.sleep(delay)
            if (self.probe is None or await self.probe()) and await self._send_all():
                delay = self.first
            else:
                delay = min(delay * 2, self.cap)

    async def _send_all(self) -> bool:
        """One round over every waiting object; False when Temporal is still unreachable."""
        for key in list(self._waiting):
            waiting = self._waiting[key]
            if time.monotonic() - waiting.since > self.give_up_after:
                log.warning("gave up re-sending %d lifecycle notifications of %s; the "
                            "reconciler will ensure its lifecycle", len(waiting.items), key)
                self.dropped += len(waiting.items)
                del self._waiting[key]
                continue
            if not await self._send_one(key, waiting):
                return False
        return True

    async def _send_one(self, key: str, waiting: _Waiting) -> bool:
        while waiting.items:
            what, send, obj = waiting.items[0]
            try:
                await send(obj)
            except Exception as exc:
                if unreachable(exc):
                    return False
                log.warning("lifecycle hook %s failed for %s: %s", what, key, exc)
                self.dropped += 1
            else:
                log.info("lifecycle hook %s for %s delivered after Temporal came back", what, key)
                self.delivered += 1
            waiting.items.pop(0)
        del self._waiting[key]
        return True
