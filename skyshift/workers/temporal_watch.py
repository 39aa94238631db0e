"""Notice when Temporal answers again after an outage, and say so (to wake the reconciler).

While Temporal is away, the API still writes new objects to etcd, but cannot start their
workflows. The reconciler would start them at its next pass, up to an interval later (and only
once they are older than its grace period); this watch lets it run a pass as soon as Temporal is
back. It asks Temporal's health endpoint every ``every`` seconds (one cheap RPC, no retries,
no history event) and calls ``on_back`` on each change from unreachable to reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta

from temporalio.client import Client

log = logging.getLogger(__name__)


class TemporalWatch:
    """Health checks of Temporal; ``on_back()`` when it answers after failing to."""

    def __init__(self, client: Client, on_back: Callable[[], None], every: float = 1.0,
                 timeout: float = 2.0) -> None:
        self.client = client
        self.on_back = on_back
        self.every = every
        self.timeout = timeout
        self.up = True
        #: how many times Temporal came back (for logs and tests)
        self.returns = 0

    async def healthy(self) -> bool:
        try:
            ok = await self.client.service_client.check_health(
                timeout=timedelta(seconds=self.timeout))
            return bool(ok)
        except Exception as exc:  # any failure means "not answering"
            log.debug("temporal health check failed: %s", exc)
            return False

    async def check(self) -> None:
        """One health check; ``on_back`` if it answers and the last one did not."""
        ok = await self.healthy()
        if ok and not self.up:
            self.returns += 1
            log.info("Temporal answers again: reconciling now")
            self.on_back()
        elif not ok and self.up:
            log.warning("Temporal does not answer; lifecycles of new objects wait for it")
        self.up = ok

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.check()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every)
