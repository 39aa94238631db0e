"""Skylet managers split the clusters by label selector (SKYSHIFT_SKYLET_SELECTOR): each cluster
is served by the manager whose selector matches it, and moves when it is relabelled."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from skyshift.lifecycle.client import connect
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@pytest.mark.parametrize("shared_client", [False, True])
async def test_each_cluster_runs_on_the_manager_its_labels_select(
    lifecycle_stack: LifecycleStack, shared_client: bool,
) -> None:
    """``shared_client``: both managers on one Temporal client, which may not run two workers
    on one task queue: the taking manager fails to start its worker while the other still
    stops its own, and must try again rather than lose its cluster watch."""
    from skyshift.activities.sync import SyncConfig
    from skyshift.store import parse_selector
    from skyshift.workers.skylet_manager import SkyletManager

    s = lifecycle_stack
    s.start_in_process(skylets=False)
    # one Temporal client each, as two hosts would have (one client may not run two workers
    # on one task queue, and the handover briefly has both)
    clients = {site: s.client if shared_client else await connect(s.temporal)
               for site in ("a", "b")}
    managers = {site: SkyletManager(clients[site], s.store, SyncConfig(**s.sync),
                                    parse_selector(f"site={site}")) for site in ("a", "b")}
    tasks = [asyncio.create_task(m.run(s.stop)) for m in managers.values()]
    try:
        await s.add_cluster("as-a", labels={"site": "a"})
        await s.add_cluster("as-b", labels={"site": "b"})
        await s.cluster_phase("as-a", "Ready")
        await s.cluster_phase("as-b", "Ready")
        assert set(managers["a"].skylets) == {"as-a"}
        assert set(managers["b"].skylets) == {"as-b"}
        for site in ("a", "b"):
            await s.submit(f"on-{site}", "echo hi", placement={
                "filters": [{"matchLabels": {"site": site}}]})
        for site in ("a", "b"):
            done = await s.job_phase(f"on-{site}", "Succeeded")
            assert done["status"]["placement"] == {f"as-{site}": 1}

        def relabel(o: dict[str, Any]) -> dict[str, Any]:
            o["metadata"]["labels"] = {"site": "b"}
            return o

        await s.store.guaranteed_update("clusters", "as-a", None, relabel)

        async def moved() -> bool:
            return set(managers["b"].skylets) == {"as-a", "as-b"} and not managers["a"].skylets

        await s.wait("as-a served by manager b", moved)
        await s.submit("after-move", "echo moved", placement={
            "filters": [{"matchLabels": {"site": "b"}}]})
        done = await s.job_phase("after-move", "Succeeded")
        assert set(done["status"]["placement"]) <= {"as-a", "as-b"}
    finally:
        s.stop.set()
        for t in tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, 15)
