"""Jobs created while Temporal is down get their lifecycles as soon as Temporal is back.

While Temporal is away the API still answers 201 (the job is in etcd) but cannot start the
job's workflow. Two mechanisms start it once Temporal answers again, each tested alone, with
the control worker's reconciler set to one pass an hour (``SKYSHIFT_RECONCILE_INTERVAL``): its
first pass runs when the worker starts, before any job exists, and the test checks that the
control worker was never restarted, so a periodic pass cannot be what started the jobs.

* the API server keeps the failed notifications and sends them again (health watch off);
* the API server is killed during the outage (its retries die with it): the control worker's
  health watch of Temporal wakes the reconciler, which starts them.

What is asserted is what a user sees: each job's workflow exists in Temporal and the job leaves
Pending, within a generous timeout that is no timing claim (the hourly pass is the only other
way they could start).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from skyshift.contract.names import job_workflow_id
from tests.faults.lifecycle_helpers import NS, FaultStack, phase_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

NO_PERIODIC_PASS = {"SKYSHIFT_RECONCILE_INTERVAL": "3600"}
JOBS = 3


async def _workflow_exists(client: Client, name: str) -> bool:
    try:
        await client.get_workflow_handle(job_workflow_id(NS, name)).describe()
        return True
    except RPCError:
        return False


async def _create_during_outage(fs: FaultStack, prefix: str) -> list[str]:
    """Stop Temporal and create ``JOBS`` jobs (each answered 201); returns their names."""
    await fs.add_cluster("a", cpus=4)
    await fs.cluster_phase("a", "Ready")
    await fs.stop("temporal")
    manifests = [fs.job_manifest(f"{prefix}-{i}", 60) for i in range(JOBS)]
    await fs.submit_all(manifests, concurrency=JOBS)
    names = [m["metadata"]["name"] for m in manifests]
    jobs = await fs.list_jobs()
    assert jobs is not None
    assert all(phase_of(jobs[n]) == "Pending" for n in names), jobs
    return names


async def _started_after_return(fs: FaultStack, names: list[str], timeout: float = 120) -> None:
    """Wait until every job has its workflow and has left Pending; fail naming the laggards."""
    client = await Client.connect(fs.stack.temporal_address)
    deadline = time.monotonic() + timeout
    missing: list[str] = list(names)
    pending: list[str] = list(names)
    while time.monotonic() < deadline:
        missing = [n for n in names if not await _workflow_exists(client, n)]
        jobs = await fs.list_jobs() or {}
        pending = [n for n in names if phase_of(jobs.get(n)) in ("Pending", "?")]
        if not missing and not pending:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(
        f"after Temporal came back: no workflow for {missing}, still Pending: {pending}\n"
        f"api log:\n{fs.log_tail('api')}\ncontrol log:\n{fs.log_tail('control')}")


async def test_api_resends_notifications_when_temporal_is_back(tmp_path: Path) -> None:
    env = {**NO_PERIODIC_PASS, "SKYSHIFT_TEMPORAL_PROBE": "0"}  # no wake-up of the reconciler
    async with FaultStack(tmp_path, **env) as fs:
        control = fs.pid("control")
        names = await _create_during_outage(fs, "api-retry")
        await fs.restart("temporal")
        await _started_after_return(fs, names)
        assert fs.pid("control") == control, "the control worker restarted (its first pass ran)"
        assert "delivered after Temporal came back" in fs.log_tail("api", 200)


async def test_reconciler_is_woken_when_temporal_is_back(tmp_path: Path) -> None:
    async with FaultStack(tmp_path, **NO_PERIODIC_PASS) as fs:
        control = fs.pid("control")
        names = await _create_during_outage(fs, "woken")
        await fs.kill9("api")  # what the API server kept for a retry is gone with it
        await fs.restart("temporal")  # `skyshift up` starts a fresh API server too
        await _started_after_return(fs, names)
        assert fs.pid("control") == control, "the control worker restarted (its first pass ran)"
        assert "Temporal answers again" in fs.log_tail("control", 400)
