"""Runs the shared ClusterManager contract against the ``k8`` adapter on a simulated cluster.

The cluster is a real kube-apiserver, scheduler and controller manager whose nodes are kwok's:
pods are scheduled and go through real phases, but no command runs. So the specs the suite
builds get kwok's knobs derived from their shell command (``sleep N`` -> runs N seconds, ``exit
N`` -> fails with N, anything else -> succeeds at once), and the five tests that read what a
command printed or saw (stdout, its environment) are replaced by versions that check the same
path with what kwok offers: its fake log, the pod's environment in the API, and kwok's exec,
which runs the command on this machine.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from skyshift.compat.base import ClusterManager
from skyshift.compat.kubernetes.adapter import KubernetesManager
from skyshift.compat.types import FAILED, RUNNING, SUCCEEDED, ReplicaSpec, ReplicaStatus
from skyshift.devstack.sim.k8s import DURATION_ENV, EXIT_CODE_ENV, SimK8sCluster
from tests.fixtures.compat import new_job, wait_for
from tests.integration.contract_suite import Cluster, ClusterManagerContract, ManagerFactory

pytest_plugins = ["tests.fixtures.k8s"]
pytestmark = pytest.mark.integration

FAKE_LOG_LAST = "end of fake log"


def sim_envs(run: str) -> dict[str, str]:
    """What a shell command would do, as kwok's knobs (see the sim's stages)."""
    envs: dict[str, str] = {}
    sleeps = [int(n) for n in re.findall(r"\bsleep (\d+)", run)]
    if sleeps and max(sleeps) >= 60:
        pass  # long enough to be "until deleted" for a test: no completion at all
    else:
        envs[DURATION_ENV] = f"{sum(sleeps) + 0.3:g}s"
    if (m := re.search(r"\bexit (\d+)", run)) and int(m.group(1)):
        envs[EXIT_CODE_ENV] = m.group(1)
    return envs


class KwokCluster(Cluster):
    def spec(self, run: str, **kw: Any) -> ReplicaSpec:
        kw["envs"] = {**(kw.get("envs") or {}), **sim_envs(run)}
        return super().spec(run, **kw)


async def settle(manager: ClusterManager, deadline: float = 30.0) -> None:
    """Wait until no pod is terminating, so capacity figures are steady."""
    assert isinstance(manager, KubernetesManager)
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        pods = await asyncio.to_thread(manager.api.request, "GET", "/api/v1/pods")
        if not any(p["metadata"].get("deletionTimestamp") for p in pods["items"]):
            return
        await asyncio.sleep(0.1)


class TestKubernetesContract(ClusterManagerContract):
    deadline = 60.0
    running_log = FAKE_LOG_LAST  # kwok's fake log stands for what the command printed

    @pytest.fixture
    def manager_factory(
        self, k8s_clusters: list[SimK8sCluster], k8s_config: Callable[..., dict[str, Any]]
    ) -> ManagerFactory:
        config = k8s_config(k8s_clusters[0])
        return lambda: KubernetesManager(k8s_clusters[0].name, config)

    @pytest.fixture
    async def cluster(self, manager_factory: ManagerFactory) -> AsyncIterator[Cluster]:
        c = KwokCluster(manager_factory, self)
        await c.manager.connect()
        await settle(c.manager)
        try:
            yield c
        finally:
            await c.cleanup()

    # ---- replaced: they need a process that prints or reads its environment ----------------

    async def test_submit_runs_to_success_with_logs(self, cluster: Cluster) -> None:
        spec = cluster.spec("echo one; echo hello-contract; echo three")
        [status] = await cluster.submit(spec)
        assert status.name == spec.name and status.state in ("Pending", RUNNING, SUCCEEDED)
        seen = [status.state]

        def progress(s: ReplicaStatus) -> bool:
            seen.append(s.state)
            return s.state in (SUCCEEDED, FAILED)

        final = await wait_for(cluster.manager, spec.name, progress, self.deadline)
        assert final.state == SUCCEEDED and final.exit_code == 0, final
        order = {"Pending": 0, RUNNING: 1, SUCCEEDED: 2}
        assert [order[s] for s in seen] == sorted(order[s] for s in seen), seen
        logs = await cluster.manager.logs(spec.name)
        assert logs.endswith(FAKE_LOG_LAST + "\n")
        assert (await cluster.manager.logs(spec.name, tail=1)).strip() == FAKE_LOG_LAST

    async def test_env_vars_visible_to_command(self, cluster: Cluster) -> None:
        spec = cluster.spec("true", rank=2, envs={"CONTRACT_VAR": "a b"})
        await cluster.submit(spec)
        await cluster.wait(spec.name, SUCCEEDED)
        manager = cluster.manager
        assert isinstance(manager, KubernetesManager)
        pod = await asyncio.to_thread(
            manager.api.request, "GET", f"/api/v1/namespaces/skyshift/pods/{spec.name}"
        )
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        assert env["CONTRACT_VAR"] == "a b"
        assert env["SKYSHIFT_JOB"] == spec.job_name
        assert env["SKYSHIFT_NAMESPACE"] == spec.namespace
        assert env["SKYSHIFT_RANK"] == "2" and env["SKYSHIFT_REPLICA"] == spec.name
        assert pod["spec"]["containers"][0]["command"] == ["/bin/sh", "-c", "true"]

    async def test_failing_command_is_failed_with_exit_code(self, cluster: Cluster) -> None:
        spec = cluster.spec("echo oops >&2; exit 7")
        await cluster.submit(spec)
        status = await cluster.wait(spec.name, SUCCEEDED, FAILED)
        assert status.state == FAILED and status.exit_code == 7, status
        assert status.reason == "Error"
        assert FAKE_LOG_LAST in await cluster.manager.logs(spec.name)

    async def test_new_instance_rediscovers_replicas(self, cluster: Cluster) -> None:
        job = new_job()
        done = cluster.spec("echo finished-before", job=job, rank=0)
        running = cluster.spec("echo still-here; sleep 600", job=job, rank=1)
        await cluster.submit(done, running)
        await cluster.wait(done.name, SUCCEEDED)
        await cluster.wait(running.name, RUNNING)
        await cluster.manager.close()

        second = cluster.factory()
        cluster.manager = second
        await second.connect()
        by_name = {s.name: s for s in await second.replicas()}
        assert by_name[done.name].state == SUCCEEDED and by_name[done.name].exit_code == 0
        assert by_name[running.name].state == RUNNING
        assert FAKE_LOG_LAST in await second.logs(done.name)
        assert await cluster.of_job(job[1], second) == sorted([done.name, running.name])
        assert sorted(await second.delete_job(job[1])) == sorted([done.name, running.name])

    async def test_exec_in_running_replica(self, cluster: Cluster) -> None:
        spec = cluster.spec("sleep 600", envs={"CONTRACT_VAR": "x"})
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        # kwok runs the command on this machine, without the pod's environment
        result = await cluster.manager.exec(
            spec.name, ["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"]
        )
        assert result.exit_code == 3
        assert result.stdout == "to-stdout\n" and result.stderr == "to-stderr\n"
        assert (await cluster.manager.exec(spec.name, ["true"])).exit_code == 0
