"""The ``skypilot`` manager's logs and sync calls, with a fake SkyPilot driver below the adapter
boundary: logs take the job from the sync round's listing (no `sky queue` of their own), say
"not started yet" for a job SkyPilot has not started, and a sync round lists the queue once."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.errors import NotFound
from skyshift.compat.skypilot import adapter
from tests.fixtures.compat import make_spec
from tests.fixtures.skypilot_driver import fake_manager, job_of


@pytest.mark.asyncio
async def test_logs_use_the_sync_rounds_listing(tmp_path: Path) -> None:
    manager, driver = fake_manager(tmp_path)
    spec = make_spec("echo hello")
    driver.jobs = [job_of(spec, 3, "RUNNING")]
    await manager.replicas()  # a sync round
    await manager.state()
    assert driver.calls.count("queue") == 1, driver.calls  # state() reused the listing
    driver.calls.clear()
    assert await manager.logs(spec.name) == "hello from 3\n"
    assert driver.calls == ["logs 3"]


@pytest.mark.asyncio
async def test_logs_of_a_job_not_started_say_so(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    manager, driver = fake_manager(tmp_path)
    spec = make_spec("echo hello")
    driver.jobs = [job_of(spec, 4, "PENDING")]
    with pytest.raises(NotFound, match=f"{spec.name} has not started yet .*job 4.*PENDING"):
        await manager.logs(spec.name)
    assert "logs 4" not in driver.calls  # SkyPilot's own call would wait for a log file
    driver.jobs = [job_of(spec, 4, "RUNNING")]
    monkeypatch.setattr(adapter, "_PENDING_REUSE", 0.0)  # that listing is no longer recent
    assert await manager.logs(spec.name) == "hello from 4\n"  # listed again: started now


@pytest.mark.asyncio
async def test_logs_of_an_unknown_replica_are_not_found(tmp_path: Path) -> None:
    manager, _ = fake_manager(tmp_path)
    with pytest.raises(NotFound, match="replica nope-0 not found on cluster sky1"):
        await manager.logs("nope-0")
