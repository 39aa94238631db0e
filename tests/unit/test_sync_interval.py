"""How often the skylet's sync looks at a cluster: the skylet's interval, or the cluster's own
``poll_interval`` (a Slurm cluster's config key, which used to be parsed and then ignored).

Pure unit test: the Slurm manager is only constructed (no command runs) and the syncer's round
cadence is read, not timed.
"""

from __future__ import annotations

import asyncio
import time
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


class Quick:
    """A manager that asks for quick rounds after a submit (Ray's and SkyPilot's kind)."""

    quick_poll = (0.2, 15.0)


def test_quick_rounds_last_the_window_after_a_submit_only() -> None:
    s = syncer(Quick(), interval=1.0)
    assert s._quick() == 1.0  # nothing submitted yet: the interval
    s.ctx.submitted = time.monotonic()
    assert s._quick() == 0.2
    s.ctx.submitted = time.monotonic() - 16.0  # the window is over
    assert s._quick() == 1.0
    assert syncer(SlurmManager("c1", {}))._quick() is None  # a manager without them


def test_quick_rounds_are_never_slower_than_the_interval() -> None:
    s = syncer(Quick(), interval=0.1)
    s.ctx.submitted = time.monotonic()
    assert s._quick() == 0.1


async def test_a_submit_ends_the_pause_of_a_quick_manager_at_once() -> None:
    s = syncer(Quick(), interval=60.0)  # without the kick this pause would take a minute
    pause = asyncio.create_task(s._pause())
    await asyncio.sleep(0.05)
    assert not pause.done()
    s.ctx.kick.set()  # what submit_replicas does once the manager took the replicas
    await asyncio.wait_for(pause, 5.0)
    assert not s.ctx.kick.is_set()  # consumed: the round after waits again


async def test_a_kick_before_the_pause_skips_it() -> None:
    s = syncer(Quick(), interval=60.0)
    s.ctx.kick.set()  # a submit during the round
    await asyncio.wait_for(s._pause(), 5.0)


async def test_a_manager_without_quick_rounds_ignores_the_kick() -> None:
    s = syncer(SlurmManager("c1", {}), interval=0.3)
    s.ctx.kick.set()
    started = time.monotonic()
    await s._pause()
    assert time.monotonic() - started >= 0.25  # waited its interval all the same
