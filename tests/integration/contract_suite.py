"""The ClusterManager contract, written once and run against every adapter.

Use it from a thin ``test_contract_<manager>.py``::

    class TestLocalContract(ClusterManagerContract):
        @pytest.fixture
        def manager_factory(self, tmp_path):
            return lambda: LocalManager("c", {...})   # a NEW instance on the same cluster per call

Each test uses fresh job names and uids and deletes its jobs at the end, so the suite can run
against a shared real cluster. Commands are POSIX ``sh``, so any image with a shell works
(``image`` is used by container managers, ignored by ``local``). Waits poll with short sleeps up
to ``deadline`` seconds and never assert how long something took.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from skyshift.compat import services
from skyshift.compat.base import ClusterManager
from skyshift.compat.errors import NotFound, Unsupported
from skyshift.compat.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    ReplicaSpec,
    ReplicaStatus,
    ServicePort,
    ServiceSpec,
)
from skyshift.models.quantity import Resources
from tests.fixtures.compat import make_spec, new_job, wait_for, wait_state

ManagerFactory = Callable[[], ClusterManager]
_ORDER = {PENDING: 0, RUNNING: 1, SUCCEEDED: 2, FAILED: 2}


class Cluster:
    """One adapter instance plus the jobs a test created on it (deleted at teardown)."""

    def __init__(self, factory: ManagerFactory, suite: ClusterManagerContract) -> None:
        self.factory = factory
        self.manager = factory()
        self.suite = suite
        self.job_uids: set[str] = set()

    def spec(self, run: str, **kw: Any) -> ReplicaSpec:
        kw.setdefault("resources", self.suite.request)
        spec = make_spec(run, image=self.suite.image, **kw)
        self.job_uids.add(spec.job_uid)
        return spec

    async def submit(self, *specs: ReplicaSpec) -> list[ReplicaStatus]:
        return await self.manager.submit(list(specs))

    async def wait(self, name: str, *states: str) -> ReplicaStatus:
        return await wait_state(self.manager, name, *states, deadline=self.suite.deadline)

    async def of_job(self, job_uid: str, manager: ClusterManager | None = None) -> list[str]:
        statuses = await (manager or self.manager).replicas()
        return sorted(s.name for s in statuses if s.job_uid == job_uid)

    async def cleanup(self) -> None:
        for uid in self.job_uids:
            with contextlib.suppress(Exception):  # never hide the test's own failure
                await self.manager.delete_job(uid)
        await self.manager.close()


class ClusterManagerContract:
    """Subclass as ``Test<Manager>Contract`` and provide a ``manager_factory`` fixture."""

    image: str = "busybox:1.36"
    request: Resources = Resources(cpus=0.5, memory=64)  # must fit one node of the cluster
    deadline: float = 60.0
    has_exec: bool = True  # False: exec must raise Unsupported and leave the replica running
    logs_bound: float = 60.0  # one logs call taking longer counts as hung
    running_log: str = "started-contract"  # what a running `echo started-contract` shows

    @pytest.fixture
    async def cluster(self, manager_factory: ManagerFactory) -> AsyncIterator[Cluster]:
        c = Cluster(manager_factory, self)
        await c.manager.connect()
        try:
            yield c
        finally:
            await c.cleanup()

    async def test_state_reports_healthy_nodes(self, cluster: Cluster) -> None:
        state = await cluster.manager.state()
        assert state.healthy
        assert state.nodes
        for node in state.nodes:
            assert node.name
            assert node.allocatable.cpus <= node.capacity.cpus + 1e-9
        assert self.request.fits_in(max(state.nodes, key=lambda n: n.capacity.cpus).capacity)

    async def test_submit_runs_to_success_with_logs(self, cluster: Cluster) -> None:
        spec = cluster.spec("echo one; echo hello-contract; echo three")
        [status] = await cluster.submit(spec)
        assert status.name == spec.name and status.job_uid == spec.job_uid
        assert status.rank == 0 and status.state in (PENDING, RUNNING, SUCCEEDED)
        seen = [status.state]

        def progress(s: ReplicaStatus) -> bool:
            seen.append(s.state)
            return s.state in (SUCCEEDED, FAILED)

        final = await wait_for(cluster.manager, spec.name, progress, self.deadline)
        assert final.state == SUCCEEDED, final
        assert final.exit_code == 0
        assert [_ORDER[s] for s in seen] == sorted(_ORDER[s] for s in seen), seen
        logs = await cluster.manager.logs(spec.name)
        assert "hello-contract" in logs
        assert (await cluster.manager.logs(spec.name, tail=2)).split() == [
            "hello-contract",
            "three",
        ]

    async def test_logs_answer_before_start_and_while_running(self, cluster: Cluster) -> None:
        """Logs never wait for the replica: just submitted, they are some text or NotFound
        saying why; running, they are the output so far. A call that hangs fails the test."""
        spec = cluster.spec("echo started-contract; sleep 600")
        await cluster.submit(spec)
        with contextlib.suppress(NotFound):
            early = await asyncio.wait_for(cluster.manager.logs(spec.name), self.logs_bound)
            assert isinstance(early, str)
        await cluster.wait(spec.name, RUNNING)
        text = ""
        for _ in range(int(self.deadline)):  # the first line may reach the log a bit later
            text = await asyncio.wait_for(cluster.manager.logs(spec.name), self.logs_bound)
            if self.running_log in text:
                break
            await asyncio.sleep(1)
        assert self.running_log in text, text

    async def test_long_replica_is_running(self, cluster: Cluster) -> None:
        spec = cluster.spec("sleep 600")
        await cluster.submit(spec)
        status = await cluster.wait(spec.name, RUNNING)
        assert status.exit_code is None and status.started_at is not None

    async def test_env_vars_visible_to_command(self, cluster: Cluster) -> None:
        spec = cluster.spec(
            'echo "var=$CONTRACT_VAR job=$SKYSHIFT_JOB ns=$SKYSHIFT_NAMESPACE '
            'rank=$SKYSHIFT_RANK replica=$SKYSHIFT_REPLICA"',
            rank=2,
            envs={"CONTRACT_VAR": "a b"},
        )
        await cluster.submit(spec)
        await cluster.wait(spec.name, SUCCEEDED)
        logs = await cluster.manager.logs(spec.name)
        assert (
            f"var=a b job={spec.job_name} ns={spec.namespace} rank=2 replica={spec.name}"
            in logs
        )

    async def test_failing_command_is_failed_with_exit_code(self, cluster: Cluster) -> None:
        spec = cluster.spec("echo oops >&2; exit 7")
        await cluster.submit(spec)
        status = await cluster.wait(spec.name, SUCCEEDED, FAILED)
        assert status.state == FAILED and status.exit_code == 7, status
        assert "oops" in await cluster.manager.logs(spec.name)

    async def test_submit_is_idempotent(self, cluster: Cluster) -> None:
        spec = cluster.spec("sleep 600")
        first = await cluster.submit(spec)
        again = await cluster.submit(spec)
        both = await asyncio.gather(cluster.submit(spec), cluster.submit(spec, spec))
        other = cluster.factory()
        await other.connect()
        try:
            from_other = await other.submit([spec])
        finally:
            await other.close()
        names = [s.name for batch in (first, again, *both, from_other) for s in batch]
        assert set(names) == {spec.name}
        await cluster.wait(spec.name, RUNNING)
        assert await cluster.of_job(spec.job_uid) == [spec.name]

    async def test_allocatable_drops_while_running_and_comes_back(self, cluster: Cluster) -> None:
        manager = cluster.manager
        before = (await manager.state()).allocatable()

        async def allocatable_becomes(cpus: float, memory: float) -> None:
            end = asyncio.get_running_loop().time() + self.deadline
            while True:
                now = (await manager.state()).allocatable()
                if abs(now.cpus - cpus) < 1e-6 and abs(now.memory - memory) < 1e-6:
                    return
                assert asyncio.get_running_loop().time() < end, (now, cpus, memory)
                await asyncio.sleep(0.05)

        quick = cluster.spec("true")
        await cluster.submit(quick)
        await cluster.wait(quick.name, SUCCEEDED)
        await allocatable_becomes(before.cpus, before.memory)  # finished replicas hold nothing

        spec = cluster.spec("sleep 600")
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        await allocatable_becomes(before.cpus - self.request.cpus,
                                  before.memory - self.request.memory)
        await manager.delete([spec.name])
        await allocatable_becomes(before.cpus, before.memory)

    async def test_delete_stops_running_replica(self, cluster: Cluster) -> None:
        spec = cluster.spec("sleep 600")
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        await cluster.manager.delete([spec.name, "no-such-replica-0"])
        assert spec.name not in [s.name for s in await cluster.manager.replicas()]
        with pytest.raises(NotFound):
            await cluster.manager.logs(spec.name)
        await cluster.manager.delete([spec.name])  # deleting again is fine

    async def test_delete_job_removes_all_its_replicas(self, cluster: Cluster) -> None:
        job, keep = new_job(), new_job()
        specs = [cluster.spec("sleep 600", job=job, rank=r) for r in range(3)]
        kept = cluster.spec("sleep 600", job=keep)
        await cluster.submit(*specs, kept)
        for s in (*specs, kept):
            await cluster.wait(s.name, RUNNING)
        removed = await cluster.manager.delete_job(job[1])
        assert sorted(removed) == sorted(s.name for s in specs)
        assert await cluster.of_job(job[1]) == []
        assert await cluster.of_job(keep[1]) == [kept.name]
        assert await cluster.manager.delete_job(job[1]) == []

    async def test_new_instance_rediscovers_replicas(self, cluster: Cluster) -> None:
        job = new_job()
        done = cluster.spec("echo finished-before", job=job, rank=0)
        running = cluster.spec("echo still-here; sleep 600", job=job, rank=1)
        await cluster.submit(done, running)
        await cluster.wait(done.name, SUCCEEDED)
        await cluster.wait(running.name, RUNNING)
        await cluster.manager.close()  # the worker goes away; replicas must not

        second = cluster.factory()
        cluster.manager = second  # teardown cleans up through the new instance
        await second.connect()
        by_name = {s.name: s for s in await second.replicas()}
        assert by_name[done.name].state == SUCCEEDED and by_name[done.name].exit_code == 0
        assert by_name[running.name].state == RUNNING
        assert "finished-before" in await second.logs(done.name)
        assert await cluster.of_job(job[1], second) == sorted([done.name, running.name])
        assert sorted(await second.delete_job(job[1])) == sorted([done.name, running.name])

    async def test_unknown_replica_is_not_found(self, cluster: Cluster) -> None:
        with pytest.raises(NotFound):
            await cluster.manager.logs("no-such-replica-0")
        with pytest.raises((NotFound, Unsupported)):
            await cluster.manager.exec("no-such-replica-0", ["true"])

    async def test_exec_in_running_replica(self, cluster: Cluster) -> None:
        spec = cluster.spec("sleep 600", envs={"CONTRACT_VAR": "x"})
        await cluster.submit(spec)
        await cluster.wait(spec.name, RUNNING)
        command = ["sh", "-c", 'echo "$CONTRACT_VAR $SKYSHIFT_REPLICA"; exit 3']
        if not self.has_exec:
            with pytest.raises(Unsupported, match="no exec"):
                await cluster.manager.exec(spec.name, command)
            assert (await cluster.wait(spec.name, RUNNING)).state == RUNNING  # untouched
            return
        result = await cluster.manager.exec(spec.name, command)
        assert result.exit_code == 3
        assert result.stdout.strip() == f"x {spec.name}"

    async def test_service_ops_work_or_are_unsupported(self, cluster: Cluster) -> None:
        """Service ops either work (apply reports an address, is idempotent, delete removes it)
        or raise Unsupported with a message naming what to do; never any other exception."""
        job = new_job()
        name = f"svc-{job[1][:8]}"
        spec = ServiceSpec(name=name, namespace="default", uid=job[1],
                           selector={"contract": name}, ports=[ServicePort(8080)])
        try:
            status = await services.apply_service(cluster.manager, spec)
        except Unsupported as exc:
            assert "no services" in str(exc) and "Kubernetes" in str(exc)
            with pytest.raises(Unsupported):
                await services.delete_service(cluster.manager, "default", name)
            return
        try:
            assert status.name == name and status.cluster_ip
            again = await services.apply_service(cluster.manager, spec)
            assert again.cluster_ip == status.cluster_ip
        finally:
            await services.delete_service(cluster.manager, "default", name)
        await services.delete_service(cluster.manager, "default", name)  # gone: still fine
