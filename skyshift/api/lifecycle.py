"""The API's view of the lifecycle plane: hooks called after etcd writes, logs and exec.

The API server never drives a workflow itself; it tells the lifecycle plane that something
happened (created, spec changed, deleting) and asks it for logs and exec. ``Lifecycle`` is that
seam: :class:`TemporalLifecycle` forwards to :mod:`skyshift.lifecycle.starter` (the Temporal front
door, which needs neither the workflows nor the activities), and tests plug in a recording double.
Hook failures never undo the etcd write. A notification that failed because Temporal was away is
sent again in the background once it answers (:mod:`.lifecycle_retry`); beyond that, the control
worker's reconciler re-ensures workflows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from skyshift.api.lifecycle_retry import Redelivery, Send, unreachable
from skyshift.lifecycle import starter
from skyshift.lifecycle.client import connect as temporal_connect
from skyshift.lifecycle.enqueue import flush as flush_requests

log = logging.getLogger(__name__)


@runtime_checkable
class Lifecycle(Protocol):
    """What the API needs from the lifecycle plane (Temporal in production)."""

    async def created(self, obj: dict[str, Any]) -> None:
        """A Job/Cluster was written to etcd: make sure its workflow runs."""

    async def spec_changed(self, obj: dict[str, Any]) -> None:
        """The object's spec changed (``generation`` went up): tell its workflow."""

    async def deleting(self, obj: dict[str, Any]) -> None:
        """``deletionTimestamp`` was set: the workflow tears down, then removes the object."""

    async def logs(self, job: dict[str, Any], tail: int | None, rank: int | None) -> str:
        """Log text of a job's replicas (one replica when ``rank`` is given)."""

    async def exec(self, job: dict[str, Any], command: list[str], rank: int) -> dict[str, Any]:
        """Run ``command`` in replica ``rank``: ``{"exit_code", "stdout", "stderr"}``."""

    async def ready(self) -> bool:
        """Whether the lifecycle plane can be reached (for ``/readyz``)."""

    async def trigger_schedule(self, schedule: dict[str, Any]) -> None:
        """Run a Schedule now (even when paused)."""

    async def backfill_schedule(
        self, schedule: dict[str, Any], start: datetime, end: datetime, overlap: str,
    ) -> None:
        """Run a Schedule for every time it would have fired in ``[start, end]`` (both included)."""


ClientFactory = Callable[[], Awaitable[Any]]


#: Seconds a stopping API waits for the placement requests it has not sent yet.
FLUSH_TIMEOUT = 5.0


class TemporalLifecycle:
    """Lifecycle hooks backed by a Temporal client.

    Give a connected ``client``, or a ``connect`` factory that is called on first use (and
    again after a failure), so the API server starts even while Temporal is still coming up.
    """

    def __init__(
        self,
        client: Any | None = None,
        *,
        connect: ClientFactory | None = None,
        health_timeout: float = 2.0,
    ) -> None:
        if client is None and connect is None:
            raise ValueError("TemporalLifecycle needs a client or a connect factory")
        self._client = client
        self._connect = connect
        self._lock = asyncio.Lock()
        self._health_timeout = health_timeout
        #: notifications waiting for Temporal to come back (see :mod:`.lifecycle_retry`)
        self.redelivery = Redelivery(probe=self.ready)

    @classmethod
    def lazy(cls, address: str, namespace: str = "default") -> TemporalLifecycle:
        """A lifecycle that connects to Temporal at ``address`` when first needed."""

        async def connect() -> Any:
            return await temporal_connect(address, namespace, lazy=True)

        return cls(connect=connect)

    async def client(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                assert self._connect is not None
                self._client = await self._connect()
        return self._client

    async def created(self, obj: dict[str, Any]) -> None:
        await self._deliver("created", self._ensure, obj)

    async def spec_changed(self, obj: dict[str, Any]) -> None:
        await self._deliver("spec_changed", self._spec, obj)

    async def deleting(self, obj: dict[str, Any]) -> None:
        await self._deliver("deleting", self._delete, obj)

    async def _deliver(self, what: str, send: Send, obj: dict[str, Any]) -> None:
        """``send(obj)`` now, or after the notifications of the same object still waiting; if
        Temporal is unreachable, keep it for :attr:`redelivery` (other errors raise)."""
        key = _ref(obj)
        if not self.redelivery.holds(key):
            try:
                await send(obj)
                return
            except Exception as exc:
                if not unreachable(exc):
                    raise
                log.warning("lifecycle hook %s for %s: Temporal unreachable (%s); retrying in "
                            "the background", what, key, exc)
        if not self.redelivery.add(key, what, send, obj):
            log.warning("too many lifecycle notifications waiting for Temporal: %s of %s is "
                        "left to the reconciler", what, key)

    async def _ensure(self, obj: dict[str, Any]) -> None:
        workflow_id = await starter.ensure_lifecycle(await self.client(), obj)
        log.debug("lifecycle ensured for %s: %s", _ref(obj), workflow_id)

    async def _spec(self, obj: dict[str, Any]) -> None:
        await starter.notify_spec_changed(await self.client(), obj)

    async def _delete(self, obj: dict[str, Any]) -> None:
        await starter.notify_deleting(await self.client(), obj)

    async def logs(self, job: dict[str, Any], tail: int | None, rank: int | None) -> str:
        text = await starter.fetch_logs(await self.client(), job, tail, rank)
        return str(text)

    async def exec(self, job: dict[str, Any], command: list[str], rank: int) -> dict[str, Any]:
        result = await starter.exec_in_replica(await self.client(), job, command, rank)
        return dict(result)

    async def trigger_schedule(self, schedule: dict[str, Any]) -> None:
        await starter.trigger_schedule(await self.client(), schedule)

    async def backfill_schedule(
        self, schedule: dict[str, Any], start: datetime, end: datetime, overlap: str,
    ) -> None:
        await starter.backfill_schedule(await self.client(), schedule, start, end, overlap)

    async def ready(self) -> bool:
        try:
            client = await self.client()
            ok = await client.service_client.check_health(
                timeout=timedelta(seconds=self._health_timeout)
            )
            return bool(ok)
        except Exception as exc:  # any failure means "not reachable" for readiness
            log.debug("temporal health check failed: %s", exc)
            return False

    async def close(self) -> None:
        """Stop re-sending (the reconciler takes over) after a short wait for the placement
        requests still on their way (the requeue sweep sends what is left); Temporal clients
        close with their runtime."""
        if self._client is not None:
            await flush_requests(self._client, FLUSH_TIMEOUT)
        await self.redelivery.close()


def _ref(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')}/{ns + '/' if ns else ''}{meta.get('name')}"


async def notify(hook: Callable[[dict[str, Any]], Awaitable[None]], obj: dict[str, Any]) -> None:
    """Run a hook, logging (not raising) failures: the etcd write already happened and the
    reconciler in the control worker re-ensures workflows that missed a notification."""
    try:
        await hook(obj)
    except Exception as exc:
        log.warning("lifecycle hook %s failed for %s: %s", hook.__name__, _ref(obj), exc)
