"""The ``skypilot`` manager's deletes, with a fake SkyPilot driver below the adapter boundary:
deleting replicas that the last sync round saw finished (a job's teardown once it ended) takes
that round's listing instead of a `sky queue` of its own; anything that may be running, or may
have landed since the listing, is listed afresh and cancelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.skypilot import adapter
from tests.fixtures.compat import make_spec, new_job
from tests.fixtures.skypilot_driver import fake_manager, job_of


@pytest.mark.asyncio
async def test_a_finished_job_is_deleted_from_the_rounds_listing(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "del-done")
    job = new_job()
    specs = [make_spec("true", job=job, rank=r) for r in range(2)]
    driver.jobs = [job_of(specs[0], 1, "SUCCEEDED"), job_of(specs[1], 2, "FAILED")]
    await manager.replicas()  # the round that saw them end
    driver.calls.clear()
    assert await manager.delete_job(job[1]) == sorted(s.name for s in specs)
    assert driver.calls == [], driver.calls  # nothing to cancel, nothing listed
    # and the deleted jobs are not listed again
    assert [s.name for s in await manager.replicas()] == []


@pytest.mark.asyncio
async def test_a_running_replica_is_listed_afresh_and_cancelled(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "del-run")
    job = new_job()
    done, running = (make_spec("true", job=job, rank=r) for r in range(2))
    driver.jobs = [job_of(done, 1, "SUCCEEDED"), job_of(running, 2, "RUNNING")]
    await manager.replicas()
    driver.calls.clear()
    assert await manager.delete_job(job[1]) == sorted([done.name, running.name])
    assert driver.calls == ["queue", "cancel 2"], driver.calls


@pytest.mark.asyncio
async def test_a_job_with_an_exec_sent_after_the_listing_is_listed_afresh(
        tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path, "del-sent")
    job = new_job()
    first, second = (make_spec("true", job=job, rank=r) for r in range(2))
    driver.jobs = [job_of(first, 1, "SUCCEEDED")]
    await manager.replicas()
    await manager.submit([second])  # sent after the listing: it may be in the queue now
    driver.calls.clear()
    assert await manager.delete_job(job[1]) == sorted([first.name, second.name])
    assert driver.calls == ["queue", "cancel 2"], driver.calls


@pytest.mark.parametrize("why", ["old", "absent", "unknown-name"])
@pytest.mark.asyncio
async def test_a_listing_that_cannot_stand_for_a_new_one_is_not_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    manager, driver = fake_manager(tmp_path, f"del-{why}")
    spec = make_spec("true")
    if why != "absent":  # absent: the listing shows nothing of it (an exec may be in flight)
        driver.jobs = [job_of(spec, 1, "SUCCEEDED")]
    await manager.replicas()
    if why == "old":
        monkeypatch.setattr(adapter, "_SUBMIT_REUSE", 0.0)
    driver.calls.clear()
    if why == "unknown-name":
        await manager.delete([spec.name, "no-such-replica-0"])
    else:
        await manager.delete([spec.name])
    assert driver.calls == ["queue"], driver.calls
