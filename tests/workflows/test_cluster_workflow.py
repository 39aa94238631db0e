"""ClusterWorkflow on the time-skipping server with fake skylet activities."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import ClusterInput, DeleteRequest, SpecChanged, SyncResult
from skyshift.contract.names import SIG_DELETE, SIG_SPEC
from skyshift.workflows.cluster import ClusterWorkflow
from tests.workflows.fakes import STARTED, Fakes, unique, workers

pytestmark = pytest.mark.asyncio


async def start(client: Client, queue: str, name: str) -> WorkflowHandle[ClusterWorkflow, str]:
    h = await client.start_workflow(
        ClusterWorkflow.run, ClusterInput(name, "uid-" + name), id=f"cluster/{name}",
        task_queue=queue,
    )
    STARTED.append(h)
    return h


async def phase_becomes(h: WorkflowHandle[ClusterWorkflow, str], want: str) -> None:
    for _ in range(200):
        if await h.query(ClusterWorkflow.current_phase) == want:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"phase never became {want}")


async def test_sync_phases_then_deletion_order(workflow_env: WorkflowEnvironment) -> None:
    name = unique("c")
    fakes = Fakes(sync_results=[SyncResult("Ready"), SyncResult("Error", "down", ["job/ns/x"])])
    async with workers(workflow_env.client, fakes, [name]) as q:
        h = await start(workflow_env.client, q, name)
        await phase_becomes(h, "Error")
        syncs = await fakes.wait_for("sync_cluster", 3)
        # the next sync continues from what the last one reported
        assert syncs[2].phase == "Error" and syncs[2].lost_jobs == ["job/ns/x"]
        await h.signal(SIG_DELETE, DeleteRequest("uid-" + name))
        assert await h.result() == "Deleted"
    names = fakes.names()
    order = [names.index(n) for n in ("teardown_cluster", "notify_cluster_jobs", "remove_object")]
    assert order == sorted(order)
    assert fakes.of("notify_cluster_jobs")[0].skip == ["job/ns/x"]
    assert fakes.of("remove_object")[0].plural == "clusters"


async def test_permanent_attach_error_waits_for_spec_change(
    workflow_env: WorkflowEnvironment,
) -> None:
    name = unique("c")
    fakes = Fakes(sync_results=[SyncResult("Error", "bad config", [], permanent=True),
                                SyncResult("Ready")])
    async with workers(workflow_env.client, fakes, [name]) as q:
        h = await start(workflow_env.client, q, name)
        await phase_becomes(h, "Error")
        await asyncio.sleep(0.2)
        assert len(fakes.of("sync_cluster")) == 1  # no retry loop on a permanent error
        await h.signal(SIG_SPEC, SpecChanged(2))
        await phase_becomes(h, "Ready")
        await h.signal(SIG_DELETE, DeleteRequest())
        assert await h.result() == "Deleted"
