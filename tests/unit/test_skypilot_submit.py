"""The ``skypilot`` manager's submit, with a fake SkyPilot driver below the adapter boundary:
a submit right after a sync round adopts from that round's listing instead of a `sky queue` of
its own (seconds of every job's start), lists afresh whenever a job of its names could have
landed since, and a replica attempt sent twice keeps only its first job."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.base import RESUBMIT
from skyshift.compat.skypilot import adapter
from skyshift.compat.types import PENDING
from tests.fixtures.compat import make_spec
from tests.fixtures.skypilot_driver import fake_manager, job_of


@pytest.mark.asyncio
async def test_a_submit_after_a_sync_round_uses_its_listing(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "sub-reuse")
    await manager.replicas()  # the sync round
    driver.calls.clear()
    spec = make_spec("true")
    [status] = await manager.submit([spec])
    assert status.state == PENDING
    assert driver.calls == ["exec 1"], driver.calls  # no `sky queue` of its own


@pytest.mark.asyncio
async def test_a_submit_adopts_the_job_the_listing_shows(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "sub-adopt")
    spec = make_spec("true")
    driver.jobs = [job_of(spec, 7, "RUNNING")]
    await manager.replicas()
    driver.calls.clear()
    [status] = await manager.submit([spec])
    assert status.state == "Running"
    assert driver.calls == [], driver.calls  # adopted: nothing sent, nothing listed


@pytest.mark.asyncio
async def test_a_name_sent_before_by_this_process_is_listed_afresh(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "sub-again")
    await manager.replicas()
    spec = make_spec("true")
    await manager.submit([spec])  # e.g. the activity timed out after its exec was sent
    await manager.replicas()
    driver.jobs.clear()  # the listing below is the one that shows what is there now
    driver.jobs.append(job_of(spec, 1, "RUNNING"))
    driver.calls.clear()
    [status] = await manager.submit([spec])  # the retry
    assert driver.calls == ["queue"], driver.calls  # listed again, and adopted
    assert status.state == "Running"


@pytest.mark.asyncio
async def test_an_old_listing_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, driver = fake_manager(tmp_path, "sub-old")
    await manager.replicas()
    monkeypatch.setattr(adapter, "_SUBMIT_REUSE", 0.0)
    driver.calls.clear()
    await manager.submit([make_spec("true")])
    assert driver.calls == ["queue", "exec 1"], driver.calls


@pytest.mark.asyncio
async def test_a_retried_submit_lists_afresh(tmp_path: Path) -> None:
    # its earlier attempt may have died (in another process) with an exec in SkyPilot's API
    # server, landing after any listing made so far
    manager, driver = fake_manager(tmp_path, "sub-retry")
    await manager.replicas()
    driver.calls.clear()
    retry = RESUBMIT.set(True)
    try:
        await manager.submit([make_spec("true")])
    finally:
        RESUBMIT.reset(retry)
    assert driver.calls == ["queue", "exec 1"], driver.calls


@pytest.mark.asyncio
async def test_a_replica_attempt_sent_twice_keeps_its_firstjob_of(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "sub-twice")
    spec, other = make_spec("true"), make_spec("true")
    driver.jobs = [job_of(spec, 3, "RUNNING"), job_of(other, 4, "RUNNING"),
                   job_of(spec, 5, "PENDING")]
    listed = {r.name: r.state for r in await manager.replicas()}
    assert listed == {spec.name: "Running", other.name: "Running"}
    assert "cancel 5" in driver.calls, driver.calls
    assert [j.status for j in driver.jobs] == ["RUNNING", "RUNNING", "CANCELLED"]
    driver.calls.clear()
    assert {r.name for r in await manager.replicas()} == {spec.name, other.name}
    assert driver.calls.count("cancel 5") == 0  # cancelled once: no longer listed


@pytest.mark.asyncio
async def test_a_higher_attempt_still_replaces_a_lower_one(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "sub-higher")
    job = ("hi", "0123456789abcdef")
    first, second = make_spec("true", job=job), make_spec("true", job=job, attempt=1)
    driver.jobs = [job_of(first, 1, "RUNNING"), job_of(second, 2, "PENDING")]
    [status] = await manager.replicas()
    assert (status.attempt, status.state) == (1, PENDING)
    assert not any(c.startswith("cancel") for c in driver.calls), driver.calls
