"""Runs the shared ClusterManager contract against the ``ray`` adapter on a real Ray head
(``ray start --head`` through skyshift/devstack/sim/ray.py), plus what only Ray has: GPU and
accelerator-type reservations, and a restart (higher attempt) under the same submission id."""

from __future__ import annotations

import asyncio

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.ray.adapter import RayManager
from skyshift.compat.types import RUNNING, SUCCEEDED
from skyshift.devstack.sim.ray import SimRayCluster
from skyshift.models.quantity import Resources
from tests.fixtures.compat import new_job
from tests.integration.contract_suite import Cluster, ClusterManagerContract, ManagerFactory

pytest_plugins = ["tests.fixtures.ray"]
pytestmark = pytest.mark.integration


class TestRayContract(ClusterManagerContract):
    request = Resources(cpus=0.25, memory=64)
    deadline = 120.0  # a Ray job's first start sets up its runtime env (slow on a busy host)
    has_exec = False  # Ray jobs have no exec: the suite checks it says so

    @pytest.fixture
    def manager_factory(self, ray_cluster: SimRayCluster) -> ManagerFactory:
        config = ray_cluster.adapter_config()
        return lambda: RayManager(ray_cluster.name, config)

    async def test_capacity_has_the_heads_gpus_by_type(self, cluster: Cluster,
                                                       ray_cluster: SimRayCluster) -> None:
        state = await cluster.manager.state()
        assert ray_cluster.gpus > 0
        assert state.capacity().gpus == ray_cluster.gpus
        assert state.capacity().accelerators.get("simgpu") == ray_cluster.gpus
        assert state.capacity().cpus == ray_cluster.cpus

    async def test_accelerator_is_reserved_while_running(self, cluster: Cluster) -> None:
        before = (await cluster.manager.state()).allocatable()
        spec = cluster.spec("sleep 600", resources=Resources(
            cpus=0.25, memory=64, accelerators={"simgpu": 1}))
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        during = (await cluster.manager.state()).allocatable()
        assert during.gpus == before.gpus - 1
        assert during.accelerators["simgpu"] == before.accelerators["simgpu"] - 1

    async def test_never_fitting_request_is_permanent(self, cluster: Cluster) -> None:
        spec = cluster.spec("true", resources=Resources(cpus=64))
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
        assert "attempt-one" in await cluster.manager.logs(second.name)
        assert "attempt-zero" not in await cluster.manager.logs(second.name)

    async def test_deleted_running_job_leaves_nothing_in_rays_table(
            self, cluster: Cluster, ray_cluster: SimRayCluster) -> None:
        """Ray's job monitor may write a deleted job's status back (a record without our
        metadata); the adapter's next listings remove it, so Ray's table does not fill up.

        The monitor writes that record once, when it finds the job's supervisor gone, and then
        stops watching the job. So the wait ends once the record came back and was removed
        again; when it does not come back (the monitor saw the job end before the delete),
        once Ray's table stayed without it for 8 s (the monitor looks every second)."""
        from ray.job_submission import JobSubmissionClient

        raw = JobSubmissionClient(ray_cluster.address)
        spec = cluster.spec("sleep 600")
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        await cluster.manager.delete([spec.name])
        end = asyncio.get_running_loop().time() + 90
        quiet_since = None
        came_back = False
        while True:
            # Ray's table first: only the adapter's listing below removes a record written back
            ids = {j.submission_id for j in await asyncio.to_thread(raw.list_jobs)}
            now = asyncio.get_running_loop().time()
            if spec.name in ids:
                came_back, quiet_since = True, None
            elif quiet_since is None:
                quiet_since = now
            if quiet_since is not None and (came_back or now - quiet_since > 8):
                break  # written back and removed, or gone and stayed gone
            assert now < end, f"{spec.name} is still in Ray's job table"
            assert spec.name not in [s.name for s in await cluster.manager.replicas()]
            await asyncio.sleep(0.5)
        assert spec.name not in [s.name for s in await cluster.manager.replicas()]
