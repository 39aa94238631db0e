"""Runs the shared ClusterManager contract against the ``ray`` adapter on a real Ray head
(``ray start --head`` through skyshift/devstack/sim_ray.py), plus what only Ray has: GPU and
accelerator-type reservations, and a restart (higher attempt) under the same submission id."""

from __future__ import annotations

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.ray_jobs import RayManager
from skyshift.compat.types import RUNNING, SUCCEEDED
from skyshift.devstack.sim_ray import SimRayCluster
from skyshift.models.quantity import Resources
from tests.fixtures.compat import new_job
from tests.integration.contract_suite import Cluster, ClusterManagerContract, ManagerFactory

pytest_plugins = ["tests.fixtures.ray"]
pytestmark = pytest.mark.integration


class TestRayContract(ClusterManagerContract):
    request = Resources(cpus=0.25, memory=64)
    deadline = 120.0  # a Ray job's first start sets up its runtime env (slow on a busy host)

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
