"""ClusterWorkflow of a Cluster with ``spec.provision`` on the time-skipping server, with fake
SkyPilot activities (``provision_cluster``, ``unprovision_cluster``, ``cluster_usage``) and a
fake skylet: the phases a user sees (Provisioning, Ready, Scaling, Failed), retries and failover
between infras, scaling, idle autodown and deletion."""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import ClusterInput, DeleteRequest, SyncResult
from skyshift.contract.names import SIG_DELETE, SIG_SCALE
from skyshift.contract.provision import ProvisionPlan, ProvisionState, ScaleRequest, sky_name
from skyshift.workflows.cluster import ClusterWorkflow
from tests.workflows.fakes import run_workers, unique
from tests.workflows.fakes import start as start_tracked
from tests.workflows.owned_fakes import ProvisionFakes
from tests.workflows.record import replays
from tests.workflows.test_cluster_workflow import phase_becomes

pytestmark = pytest.mark.asyncio
UID = "uid-pv1234"
Handle = WorkflowHandle[ClusterWorkflow, str]


def plan(**kw: object) -> ProvisionPlan:
    base: dict[str, object] = {
        "infras": ["aws", "gcp"],
        "cpus": 2.0,
        "attempts_per_infra": 2,
        "backoff_s": 0.05,
        "timeout_s": 60,
    }
    return ProvisionPlan(**{**base, **kw})  # type: ignore[arg-type]


async def start(client: Client, q: str, name: str, p: ProvisionPlan) -> Handle:
    inp = ClusterInput(name, UID, provision=ProvisionState(p))
    h: Handle = await start_tracked(client, ClusterWorkflow.run, inp, f"cluster/{name}", q)
    return h


def written(fakes: ProvisionFakes) -> list[tuple[str, str]]:
    return [(p.phase, p.message) for p in fakes.of("write_cluster_status")]


async def grows(h: Handle, fakes: ProvisionFakes, ask: ScaleRequest, group: str, nodes: int,
                message: str) -> None:
    """The scheduler's ``scale`` launches one more group (``group``, ``nodes`` nodes), and the
    Cluster is Ready again saying ``message``."""
    launches, writes = len(fakes.of("provision_cluster")), len(written(fakes))
    await h.signal(SIG_SCALE, ask)
    await fakes.wait_for("provision_cluster", launches + 1)
    await fakes.wait_for("write_cluster_status", writes + 1)
    grow = fakes.of("provision_cluster")[-1]
    assert (grow.sky_cluster, grow.nodes, grow.phase) == (group, nodes, "Scaling")
    assert written(fakes)[-1] == ("Ready", message)


async def test_fails_over_to_the_next_infra_then_deletes_every_group(
    workflow_env: WorkflowEnvironment,
) -> None:
    name = unique("pv")
    fakes = ProvisionFakes(launch_errors={"aws": "Capacity"}, sync_results=[SyncResult("Ready")])
    async with run_workers(
        workflow_env.client, [ClusterWorkflow], fakes.provision(), fakes.skylet(), [name]
    ) as q:
        h = await start(workflow_env.client, q, name, plan())
        await phase_becomes(h, "Ready")
        launches = fakes.of("provision_cluster")
        # two attempts on aws (Temporal's retries), then the same group name on gcp
        assert [(x.infra, x.sky_cluster) for x in launches] == [
            ("aws", sky_name(name, UID, 0))
        ] * 2 + [("gcp", sky_name(name, UID, 0))]
        assert launches[-1].attempts_before == 2
        # what the attempts on aws may have left is torn down before gcp is tried
        assert fakes.of("unprovision_cluster")[0].sky_clusters == [sky_name(name, UID, 0)]
        assert fakes.names().index("unprovision_cluster") < len(fakes.names()) - 1
        assert written(fakes)[0] == ("Provisioning", "provisioning on aws")
        await h.signal(SIG_DELETE, DeleteRequest(UID))
        assert await h.result() == "Deleted"
    tail = [n for n in fakes.names() if n != "sync_cluster"][-4:]
    assert tail == [
        "teardown_cluster",
        "unprovision_cluster",
        "notify_cluster_jobs",
        "remove_object",
    ]
    assert fakes.of("unprovision_cluster")[-1].phase == "Terminating"
    await replays(h, "cluster_provision_failover_wf")


async def test_permanent_error_fails_at_once_and_deletion_downs_what_was_tried(
    workflow_env: WorkflowEnvironment,
) -> None:
    name = unique("pv")
    fakes = ProvisionFakes(launch_errors={"aws": "Permanent"})
    async with run_workers(
        workflow_env.client, [ClusterWorkflow], fakes.provision(), fakes.skylet(), [name]
    ) as q:
        h = await start(workflow_env.client, q, name, plan())
        await phase_becomes(h, "Failed")
        assert len(fakes.of("provision_cluster")) == 1  # neither retried nor failed over
        assert written(fakes)[-1] == ("Failed", "aws: no Permanent")
        await h.signal(SIG_DELETE, DeleteRequest(UID))
        assert await h.result() == "Deleted"
    # nothing was UP: no skylet teardown, only the name a launch may have started
    assert "teardown_cluster" not in fakes.names()
    assert fakes.of("unprovision_cluster")[-1].sky_clusters == [sky_name(name, UID, 0)]
    assert fakes.names()[-1] == "remove_object"
    await replays(h, "cluster_provision_failed_wf")


async def test_scales_up_then_idles_down_and_away(workflow_env: WorkflowEnvironment) -> None:
    name = unique("pv")
    fakes = ProvisionFakes(replicas=1, sync_results=[SyncResult("Ready")])
    async with run_workers(
        workflow_env.client, [ClusterWorkflow], fakes.provision(), fakes.skylet(), [name]
    ) as q:
        h = await start(
            workflow_env.client, q, name, plan(max_nodes=3, idle_minutes=2, minute_s=1.0)
        )
        await phase_becomes(h, "Ready")
        await grows(h, fakes, ScaleRequest(3, "2 replicas pending"), sky_name(name, UID, 1), 2,
                    "3 nodes in 2 SkyPilot clusters")
        fakes.replicas = 0  # the replicas end: idle from now on
        # idle twice over (the sync activity keeps time from skipping): then autodown
        assert await h.result() == "Deleted"
    downs = [d.sky_clusters for d in fakes.of("unprovision_cluster")]
    assert downs == [[sky_name(name, UID, 1)], [sky_name(name, UID, 0), sky_name(name, UID, 1)]]
    assert ("Ready", "idle for 2 min: 1 SkyPilot clusters torn down") in written(fakes)
    assert fakes.names()[-1] == "remove_object"
    await replays(h, "cluster_provision_scaled_idle_wf")


async def test_scales_from_zero_and_idles_back_to_zero(workflow_env: WorkflowEnvironment) -> None:
    """``nodes.min: 0``: nothing is launched until the scheduler asks; the first scale launches
    group 0, idling tears every group down and the Cluster stays (Ready, no nodes); deletion
    then downs only what was ever tried."""
    name = unique("pv0")
    fakes = ProvisionFakes(replicas=1, sync_results=[SyncResult("Ready")])
    async with run_workers(
        workflow_env.client, [ClusterWorkflow], fakes.provision(), fakes.skylet(), [name]
    ) as q:
        h = await start(workflow_env.client, q, name,
                        plan(min_nodes=0, max_nodes=2, idle_minutes=2, minute_s=1.0))
        await fakes.wait_for("sync_cluster", 1)  # the skylet's sync over no SkyPilot cluster
        assert fakes.of("provision_cluster") == []
        assert ("Provisioning", "provisioning on aws") not in written(fakes)
        await grows(h, fakes, ScaleRequest(1, "1 replica pending"), sky_name(name, UID, 0), 1,
                    "1 nodes in 1 SkyPilot clusters")
        fakes.replicas = 0  # the replica ends: idle from now on
        await fakes.wait_for("unprovision_cluster", 1)
        await fakes.wait_for("write_cluster_status", 2)
        assert written(fakes)[-1] == (
            "Ready", "idle for 2 min: 1 SkyPilot clusters torn down, scaled to zero")
        assert await h.query(ClusterWorkflow.current_phase) == "Ready"  # not removed
        await h.signal(SIG_DELETE, DeleteRequest(UID))
        assert await h.result() == "Deleted"
    downs = [d.sky_clusters for d in fakes.of("unprovision_cluster")]
    assert downs == [[sky_name(name, UID, 0)], [sky_name(name, UID, 0)]]
    assert fakes.names()[-1] == "remove_object"
    await replays(h, "cluster_provision_from_zero_wf")
