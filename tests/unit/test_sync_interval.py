"""How often the skylet's sync looks at a cluster: the skylet's interval, or the cluster's own
``poll_interval`` (a Slurm cluster's config key, which used to be parsed and then ignored).

Pure unit test: the Slurm manager is only constructed (no command runs) and the syncer's round
cadence is read, not timed.
"""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.slurm.adapter import SlurmManager
from tests.unit.test_sync_report_cancelled import FakeClient, FakeStore


def syncer(manager: Any, interval: float = 1.0) -> Syncer:
    ctx = ClusterContext("c1", manager=manager)
    acts = SkyletWithSync(ctx, FakeStore(), FakeClient())  # type: ignore[arg-type]
    return Syncer(acts, SyncConfig(interval=interval))


def test_a_slurm_cluster_without_poll_interval_is_synced_at_the_skylets_interval() -> None:
    manager = SlurmManager("c1", {})
    assert manager.poll_interval is None
    assert syncer(manager, interval=1.5)._interval() == 1.5


@pytest.mark.parametrize("value", [0.5, 3, 10.0])
def test_poll_interval_in_a_slurm_clusters_config_sets_its_sync_interval(value: float) -> None:
    manager = SlurmManager("c1", {"poll_interval": value})
    assert manager.poll_interval == value
    assert syncer(manager, interval=1.0)._interval() == value


def test_a_manager_without_the_notion_is_synced_at_the_skylets_interval() -> None:
    class Plain:
        pass

    assert syncer(Plain(), interval=0.25)._interval() == 0.25


async def test_a_pause_longer_than_the_heartbeat_timeout_keeps_heartbeating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync activity's heartbeat timeout is 5 s: a cluster synced every 30 s must not look
    like a dead worker between rounds (Temporal would cancel and retry the sync each time)."""
    from temporalio import activity

    beats: list[object] = []
    monkeypatch.setattr(activity, "heartbeat", lambda *details: beats.append(details))
    await syncer(SlurmManager("c1", {"poll_interval": 2.5}))._pause()
    assert beats, "no heartbeat during a 2.5 s pause"
