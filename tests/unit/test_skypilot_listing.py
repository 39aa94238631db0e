"""The ``skypilot`` manager's listings, with a fake SkyPilot driver below the adapter boundary:
readers (a sync round, logs) that ask while a `sky queue` of this manager is in flight share it
instead of sending another beside it (SkyPilot's API server runs concurrent ones several times
slower); logs of a replica that has not started are answered from a listing a few seconds old,
so `skyctl logs -f` on a pending job does not send a `sky queue` per replica per poll."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skyshift.compat.errors import NotFound
from skyshift.compat.skypilot import adapter
from tests.fixtures.compat import make_spec
from tests.fixtures.skypilot_driver import fake_manager, job_of

pytestmark = pytest.mark.asyncio


async def test_readers_share_the_listing_in_flight(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "list-share")
    spec = make_spec("sleep 60")
    driver.jobs = [job_of(spec, 1, "RUNNING")]
    driver.queue_seconds = 0.3
    answers = await asyncio.gather(manager.replicas(), manager.replicas(), manager.state())
    assert driver.calls.count("queue") == 1, driver.calls
    assert [[s.name for s in a] for a in answers[:2]] == [[spec.name], [spec.name]]
    assert answers[2].healthy


async def test_a_submit_lists_for_itself_beside_a_reader(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "list-own")
    driver.queue_seconds = 0.3
    spec = make_spec("true")
    reader = asyncio.create_task(manager.replicas())
    await asyncio.sleep(0.05)  # the reader's listing is in flight
    await manager.submit([spec])  # must not take that listing (it may miss what lands now)
    await reader
    assert driver.calls.count("queue") == 2, driver.calls


async def test_a_reader_that_gives_up_leaves_the_listing_to_the_others(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "list-cancel")
    driver.queue_seconds = 0.3
    first = asyncio.create_task(manager.replicas())
    await asyncio.sleep(0.05)
    second = asyncio.create_task(manager.replicas())
    await asyncio.sleep(0.05)
    first.cancel()
    assert await second == []
    assert driver.calls.count("queue") == 1, driver.calls


async def test_logs_of_a_pending_replica_reuse_a_recent_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, driver = fake_manager(tmp_path, "list-pending")
    spec = make_spec("echo hi")
    driver.jobs = [job_of(spec, 1, "PENDING")]
    await manager.replicas()
    driver.calls.clear()
    for _ in range(3):  # `skyctl logs -f` polling before the replica starts
        with pytest.raises(NotFound, match="has not started yet"):
            await manager.logs(spec.name)
    assert driver.calls == [], driver.calls
    # a few seconds later it is asked again, and once started the log is read
    monkeypatch.setattr(adapter, "_PENDING_REUSE", 0.0)
    driver.jobs = [job_of(spec, 1, "RUNNING")]
    assert "hello from 1" in await manager.logs(spec.name)
    assert driver.calls == ["queue", "logs 1"], driver.calls
