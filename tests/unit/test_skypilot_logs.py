"""The ``skypilot`` manager's logs and sync calls, with a fake SkyPilot driver below the adapter
boundary: logs take the job from the sync round's listing (no `sky queue` of their own), say
"not started yet" for a job SkyPilot has not started, and a sync round lists the queue once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skyshift.compat.errors import NotFound
from skyshift.compat.skypilot.adapter import SkyPilotManager
from skyshift.compat.skypilot.client import SkyJob
from skyshift.compat.skypilot.map import JobMeta
from skyshift.compat.types import ReplicaSpec
from tests.fixtures.compat import make_spec

SKY = "sky1-abc-0"


class FakeDriver:
    """What the manager asks SkyPilot, counted; the queue holds ``jobs``."""

    def __init__(self) -> None:
        self.jobs: list[SkyJob] = []
        self.calls: list[str] = []

    def queue(self, clusters: list[str], timeout: float | None = None) -> dict[str, Any]:
        self.calls.append("queue")
        return {SKY: list(self.jobs)}

    def clusters(self, names: list[str], refresh: bool = False) -> list[dict[str, Any]]:
        self.calls.append("status")
        return [{"name": SKY, "status": "UP", "nodes": 1, "cpus": "4", "memory": "4"}]

    def logs(self, cluster: str, job_id: int, tail: int = 0, timeout: float | None = None) -> str:
        self.calls.append(f"logs {job_id}")
        return f"(task, pid=1) hello from {job_id}\n"


def _manager(tmp_path: Path) -> tuple[SkyPilotManager, FakeDriver]:
    manager = SkyPilotManager("sky1", {"sky_clusters": [SKY], "state_dir": str(tmp_path)})
    driver = FakeDriver()
    manager.client = driver  # type: ignore[assignment]
    return manager, driver


def _job(spec: ReplicaSpec, job_id: int, status: str) -> SkyJob:
    return SkyJob(job_id, JobMeta.of(spec).job_name(), status)


@pytest.mark.asyncio
async def test_logs_use_the_sync_rounds_listing(tmp_path: Path) -> None:
    manager, driver = _manager(tmp_path)
    spec = make_spec("echo hello")
    driver.jobs = [_job(spec, 3, "RUNNING")]
    await manager.replicas()  # a sync round
    await manager.state()
    assert driver.calls.count("queue") == 1, driver.calls  # state() reused the listing
    driver.calls.clear()
    assert await manager.logs(spec.name) == "hello from 3\n"
    assert driver.calls == ["logs 3"]


@pytest.mark.asyncio
async def test_logs_of_a_job_not_started_say_so(tmp_path: Path) -> None:
    manager, driver = _manager(tmp_path)
    spec = make_spec("echo hello")
    driver.jobs = [_job(spec, 4, "PENDING")]
    with pytest.raises(NotFound, match=f"{spec.name} has not started yet .*job 4.*PENDING"):
        await manager.logs(spec.name)
    assert "logs 4" not in driver.calls  # SkyPilot's own call would wait for a log file
    driver.jobs = [_job(spec, 4, "RUNNING")]
    assert await manager.logs(spec.name) == "hello from 4\n"  # listed again: started now


@pytest.mark.asyncio
async def test_logs_of_an_unknown_replica_are_not_found(tmp_path: Path) -> None:
    manager, _ = _manager(tmp_path)
    with pytest.raises(NotFound, match="replica nope-0 not found on cluster sky1"):
        await manager.logs("nope-0")
