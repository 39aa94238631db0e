"""Links end to end on the real dev server, etcd and local clusters: Ready when both clusters
are, Error naming a missing or unhealthy cluster or a gateway that refuses connections from the
source cluster, back to Ready when it is fixed, and removed on delete."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from skyshift.activities import spawn
from skyshift.lifecycle import starter
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@pytest_asyncio.fixture
async def listener() -> AsyncIterator[int]:
    """A TCP port something listens on (a gateway that answers)."""
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


async def link(s: LifecycleStack, name: str, **spec: Any) -> None:
    manifest = {"kind": "Link", "metadata": {"name": name},
                "spec": {"source_cluster": "ln-a", "target_cluster": "ln-b", **spec}}
    await spawn.create_and_start(s.store, s.client, manifest)  # as the API does


async def status(s: LifecycleStack, name: str, phase: str, words: str = "",
                 timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await s.get("links", name)
        st = (obj or {}).get("status") or {}
        return st if st.get("phase") == phase and words in st.get("message", "") else None

    try:
        found: dict[str, Any] = await s.wait(f"link {name} {phase} {words!r}", check, timeout)
    except AssertionError:
        raise AssertionError(f"{await s.get('links', name)}") from None
    return found


async def change(s: LifecycleStack, name: str, **spec: Any) -> None:
    def mutate(o: dict[str, Any]) -> dict[str, Any]:
        o["spec"].update(spec)
        o["metadata"]["generation"] += 1
        return o

    obj = await s.store.guaranteed_update("links", name, None, mutate)
    await starter.notify_spec_changed(s.client, obj)


async def test_link_status_follows_clusters_and_gateway(
    lifecycle_stack: LifecycleStack, listener: int,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("ln-a")
    await s.cluster_phase("ln-a", "Ready")
    await s.add_cluster("ln-b")
    await s.cluster_phase("ln-b", "Ready")

    await link(s, "direct")
    st = await status(s, "direct", "Ready", "direct")
    assert st["workflowId"] == "link/direct" and st["since"] and st["observedGeneration"] == 1

    await link(s, "gw", gateway={"address": "127.0.0.1", "port": listener})
    await status(s, "gw", "Ready", f"through gateway 127.0.0.1:{listener}")
    port = closed_port()
    await change(s, "gw", gateway={"address": "127.0.0.1", "port": port})
    st = await status(s, "gw", "Error", f"gateway 127.0.0.1:{port} is not reachable")
    assert "from cluster ln-a" in st["message"] and "refused" in st["message"].lower()
    await change(s, "gw", gateway={"address": "127.0.0.1", "port": listener})
    await status(s, "gw", "Ready", "through gateway")

    # a cluster that goes away makes the link an Error naming it
    await s.delete("clusters", "ln-b")
    await status(s, "direct", "Error", "target cluster ln-b", timeout=90)

    await s.delete("links", "direct")

    async def gone() -> bool:
        return await s.get("links", "direct") is None

    await s.wait("link removed", gone)
