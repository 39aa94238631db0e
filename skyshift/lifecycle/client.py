"""How every SkyShift process connects to Temporal: one place for the client's options.

The data converter (:mod:`.converter`) writes the same ``json/plain`` payloads as Temporal's
default one, several times faster; the replay tests decode histories recorded before it with it.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.runtime import Runtime

from skyshift.lifecycle.converter import DATA_CONVERTER


async def connect(
    address: str, namespace: str = "default", *, lazy: bool = False, runtime: Runtime | None = None
) -> Client:
    """A client of ``namespace`` at ``address`` (``lazy``: connect on the first call)."""
    return await Client.connect(
        address, namespace=namespace, lazy=lazy, runtime=runtime, data_converter=DATA_CONVERTER
    )
