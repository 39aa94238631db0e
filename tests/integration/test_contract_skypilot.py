"""Runs the shared ClusterManager contract against the ``skypilot`` manager: replicas are jobs in
the queue of a SkyPilot cluster really launched (SkyPilot 0.14, ``slurm/skysim1``) on the
simulated Slurm cluster, driven as the dedicated SkyPilot user. Plus what only this manager has:
a replica that can never fit, a restart under a higher attempt, and the job names it leaves in
SkyPilot's queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.skypilot.adapter import SkyPilotManager
from skyshift.compat.skypilot.client import SkyPilotClient
from skyshift.compat.types import RUNNING, SUCCEEDED
from skyshift.models.quantity import Resources
from tests.fixtures.compat import new_job
from tests.fixtures.skypilot import SESSION_SHAPE, SkyCluster
from tests.integration.contract_suite import Cluster, ClusterManagerContract, ManagerFactory

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # SkyPilot calls take seconds


class TestSkyPilotContract(ClusterManagerContract):
    request = Resources(cpus=1, memory=64)  # a SkyPilot job on Slurm holds whole CPUs
    deadline = 300.0  # every SkyPilot call is seconds (a queue ~7 s) on a busy host
    has_exec = False  # `sky exec` starts a new job: no exec into a running one

    @pytest.fixture
    def manager_factory(self, sky_cluster: SkyCluster, tmp_path: Path) -> ManagerFactory:
        config = {"sky_clusters": [sky_cluster.name], "state_dir": str(tmp_path)}
        return lambda: SkyPilotManager("sp1", config)

    async def test_never_fitting_request_is_permanent(self, cluster: Cluster) -> None:
        spec = cluster.spec("true", resources=Resources(cpus=64, memory=64))
        with pytest.raises(Permanent, match="never fit"):
            await cluster.submit(spec)

    async def test_higher_attempt_replaces_the_job(self, cluster: Cluster) -> None:
        job = new_job()
        first = cluster.spec("echo attempt-zero; sleep 600", job=job)
        await cluster.submit(first)
        await cluster.wait(first.name, RUNNING)
        second = cluster.spec("echo attempt-one", job=job, attempt=1)
        [status] = await cluster.submit(second)
        assert status.attempt == 1
        done = await cluster.wait(second.name, SUCCEEDED)
        assert done.attempt == 1
        logs = await cluster.manager.logs(second.name)
        assert "attempt-one" in logs and "attempt-zero" not in logs

    async def test_replica_is_a_named_job_in_skypilots_queue(
            self, cluster: Cluster, sky_cluster: SkyCluster, sky_client: SkyPilotClient) -> None:
        spec = cluster.spec("sleep 600")
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        table = sky_client.queue([sky_cluster.name])[sky_cluster.name]
        assert isinstance(table, list)
        mine = [j for j in table if j.name.startswith(f"{spec.name}.ss1.")]
        assert [j.status for j in mine] == ["RUNNING"]
        await cluster.manager.delete([spec.name])
        table = sky_client.queue([sky_cluster.name])[sky_cluster.name]
        assert isinstance(table, list)
        assert [j.status for j in table if j.job_id == mine[0].job_id] == ["CANCELLED"]


async def test_a_sky_cluster_that_is_not_up_is_reported_and_skipped(
        sky_cluster: SkyCluster, tmp_path: Path) -> None:
    manager = SkyPilotManager("sp2", {"sky_clusters": [sky_cluster.name, "ss-test-absent"],
                                      "state_dir": str(tmp_path)})
    state = await manager.state()
    assert state.healthy
    assert "not up: ss-test-absent" in state.message
    assert state.nodes and all(n.name.startswith(f"{sky_cluster.name}-") for n in state.nodes)
    assert state.capacity().cpus == SESSION_SHAPE.cpus  # the launched node's, not Slurm's 8
    assert isinstance(await manager.replicas(), list)  # the absent one's queue: nothing of ours
