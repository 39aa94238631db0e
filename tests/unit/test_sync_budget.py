"""A manager whose listing is slow by nature (SkyPilot: a `sky queue` takes seconds) declares
``sync_timeout``: the skylet's sync waits that long for a round and calls the cluster lost only
after two such rounds; the others keep the configured bounds. Before, every SkyPilot cluster
timed out at the default 5 s and flapped to Error."""

from __future__ import annotations

import asyncio
from typing import Any

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ClusterState


class SlowManager:
    name, manager = "c1", "slow"
    sync_timeout = 0.6

    async def connect(self) -> None:
        return None

    async def replicas(self) -> list[Any]:
        await asyncio.sleep(0.3)  # longer than the configured call_timeout below
        return []

    async def state(self) -> ClusterState:
        return ClusterState(healthy=True)


def _syncer(manager: Any, cfg: SyncConfig) -> Syncer:
    ctx = ClusterContext("c1", manager=manager)
    return Syncer(SkyletWithSync(ctx, None, None), cfg)  # type: ignore[arg-type]


async def test_a_slow_managers_round_gets_its_declared_budget() -> None:
    cfg = SyncConfig(call_timeout=0.1, lost_after=0.2)
    syncer = _syncer(SlowManager(), cfg)
    assert syncer._call_timeout() == 0.6 and syncer._lost_after() == 1.2
    state, listing = await asyncio.wait_for(syncer._observe(), syncer._call_timeout())
    assert state.healthy and listing == []


async def test_other_managers_keep_the_configured_bounds() -> None:
    class Plain(SlowManager):
        sync_timeout = 0.0

    syncer = _syncer(Plain(), SyncConfig(call_timeout=0.1, lost_after=0.2))
    assert syncer._call_timeout() == 0.1 and syncer._lost_after() == 0.2
