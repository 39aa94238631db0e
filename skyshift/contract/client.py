"""How every SkyShift process connects to Temporal: one place for the client's options.

The data converter is Temporal's default (JSON), which round-trips the contract's plain
dataclasses; a process that needs another (encryption, compression) changes it here, and every
process then agrees on it.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.runtime import Runtime


async def connect(
    address: str, namespace: str = "default", *, lazy: bool = False, runtime: Runtime | None = None
) -> Client:
    """A client of ``namespace`` at ``address`` (``lazy``: connect on the first call)."""
    return await Client.connect(address, namespace=namespace, lazy=lazy, runtime=runtime)
