"""The Slurm adapter against real slurmctld/slurmd: what the contract suite does not cover.

Job counts are checked in squeue itself (not only through the adapter), fault tests stop the
second cluster's controller and start it again, and the SSH path runs through a private sshd.
Every wait is bounded; nothing asserts how long something took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skyshift.compat.errors import Permanent, Transient
from skyshift.compat.slurm.adapter import SlurmManager
from skyshift.compat.types import FAILED, RUNNING, SUCCEEDED, ReplicaStatus
from skyshift.devstack.sim.slurm import SimSlurmCluster
from skyshift.models.quantity import Resources
from tests.fixtures.compat import make_spec, wait_for, wait_state

if TYPE_CHECKING:
    from tests.fixtures.slurm import SshServer

pytest_plugins = ["tests.fixtures.slurm"]
pytestmark = pytest.mark.integration

DEADLINE = 60.0


def squeue_jobs(cluster: SimSlurmCluster) -> list[dict[str, Any]]:
    out = subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True,
                         env={**os.environ, **cluster.env}).stdout
    doc = json.loads(out)
    assert not doc.get("errors"), doc["errors"]
    jobs: list[dict[str, Any]] = doc["jobs"]
    return jobs


def workdir(cluster: SimSlurmCluster) -> Path:
    return Path(cluster.root) / "work" / f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def make_manager(
    slurm_clusters: list[SimSlurmCluster],
) -> AsyncIterator[Callable[..., SlurmManager]]:
    made: list[SlurmManager] = []

    def build(index: int = 0, **config: Any) -> SlurmManager:
        cluster = slurm_clusters[index]
        base = cluster.adapter_config(workdir(cluster))
        manager = SlurmManager(cluster.name, {**base, **config})
        made.append(manager)
        return manager

    yield build
    for manager in made:
        with contextlib.suppress(Exception):  # best effort: never hide the test's own failure
            await manager.delete([s.name for s in await manager.replicas()])
        await manager.close()


async def test_submit_running_then_succeeded(make_manager: Callable[..., SlurmManager]) -> None:
    manager = make_manager()
    spec = make_spec("echo started; sleep 2; echo finished", resources=Resources(cpus=1))
    [first] = await manager.submit([spec])
    assert first.name == spec.name
    seen: list[str] = []

    def done(s: ReplicaStatus) -> bool:
        seen.append(s.state)
        return s.finished

    final = await wait_for(manager, spec.name, done, DEADLINE)
    assert final.state == SUCCEEDED and final.exit_code == 0, final
    assert RUNNING in seen
    assert final.started_at is not None and final.finished_at is not None
    assert "finished" in await manager.logs(spec.name)


async def test_cpu_only_and_memory_less_jobs_submit(
    make_manager: Callable[..., SlurmManager],
) -> None:
    """The original failed to submit these (missing memory/gpus keys)."""
    manager = make_manager()
    specs = [
        make_spec("true", resources=Resources()),
        make_spec("true", resources=Resources(cpus=2)),
        make_spec("true", resources=Resources(memory=128)),
    ]
    await manager.submit(specs)
    for spec in specs:
        status = await wait_state(manager, spec.name, SUCCEEDED, FAILED, deadline=DEADLINE)
        assert status.state == SUCCEEDED, status


async def test_failing_command_keeps_exit_code_and_message(
    make_manager: Callable[..., SlurmManager],
) -> None:
    manager = make_manager()
    spec = make_spec("echo broken >&2; exit 42")
    await manager.submit([spec])
    status = await wait_state(manager, spec.name, SUCCEEDED, FAILED, deadline=DEADLINE)
    assert status.state == FAILED and status.exit_code == 42 and status.reason == "Error"
    assert "broken" in await manager.logs(spec.name)


async def test_delete_cancels_running_job_in_slurm(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    manager = make_manager()
    spec = make_spec("sleep 600")
    await manager.submit([spec])
    await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
    await manager.delete([spec.name])
    mine = [j for j in squeue_jobs(slurm_clusters[0]) if j["name"] == spec.name]
    assert mine and all(j["job_state"] == "CANCELLED" for j in mine), mine
    assert spec.name not in [s.name for s in await manager.replicas()]


async def test_idempotent_resubmission_creates_no_duplicate(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    manager = make_manager()
    spec = make_spec("sleep 600")
    await manager.submit([spec])
    await manager.submit([spec])
    await asyncio.gather(manager.submit([spec]), manager.submit([spec, spec]))
    other = make_manager(workdir=manager.config.workdir)  # a retried activity on a new worker
    await other.submit([spec])
    await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
    assert len([j for j in squeue_jobs(slurm_clusters[0]) if j["name"] == spec.name]) == 1


async def test_new_attempt_resubmits_a_finished_replica(
    make_manager: Callable[..., SlurmManager],
) -> None:
    manager = make_manager()
    spec = make_spec("echo attempt-$SKYSHIFT_REPLICA; exit 1")
    await manager.submit([spec])
    first = await wait_state(manager, spec.name, FAILED, deadline=DEADLINE)
    assert first.attempt == 0
    again = make_spec("echo second-try; exit 0", job=(spec.job_name, spec.job_uid), attempt=1)
    await manager.submit([again])
    second = await wait_for(manager, spec.name,
                            lambda s: s.attempt == 1 and s.state == SUCCEEDED, DEADLINE)
    assert second.exit_code == 0
    assert "second-try" in await manager.logs(spec.name)
    # a retry of attempt 0 after attempt 1 changes nothing
    await manager.submit([spec])
    [now] = [s for s in await manager.replicas() if s.name == spec.name]
    assert now.attempt == 1 and now.state == SUCCEEDED


async def test_gpus_are_capacity_and_can_be_requested(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    sim = slurm_clusters[0]
    manager = make_manager()
    state = await manager.state()
    assert state.labels.get("slurm/partition") == "debug"
    assert sim.node_gpus > 0
    assert {n.capacity.gpus for n in state.nodes} == {sim.node_gpus}
    assert {n.capacity.accelerators.get(sim.gpu_type) for n in state.nodes} == {sim.node_gpus}
    assert {n.capacity.cpus for n in state.nodes} == {sim.node_cpus}
    assert {n.capacity.memory for n in state.nodes} == {sim.node_memory}
    spec = make_spec('echo "gpus=$SLURM_JOB_GPUS"; sleep 600',
                     resources=Resources(cpus=1, memory=100, gpus=1))
    await manager.submit([spec])
    await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
    state = await manager.state()
    assert state.allocatable().gpus <= state.capacity().gpus - 1


async def test_request_that_never_fits_is_permanent(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    sim = slurm_clusters[0]
    manager = make_manager()
    for resources in (Resources(cpus=sim.node_cpus + 1), Resources(memory=sim.node_memory * 2),
                      Resources(gpus=sim.node_gpus + 1)):
        with pytest.raises(Permanent, match="never fit"):
            await manager.submit([make_spec("true", resources=resources)])


async def test_unknown_partition_is_permanent(make_manager: Callable[..., SlurmManager]) -> None:
    with pytest.raises(Permanent, match="partition"):
        await make_manager(partition="nope").connect()


async def test_controller_down_is_transient_and_recovers(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    cluster = slurm_clusters[1]
    manager = make_manager(1, command_timeout=30)
    await manager.connect()
    spec = make_spec("sleep 600")
    await manager.submit([spec])
    await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
    cluster.stop_controller()
    try:
        with pytest.raises(Transient):
            await manager.state()
        with pytest.raises(Transient):
            await manager.replicas()
        with pytest.raises(Transient):
            await manager.submit([make_spec("true")])
    finally:
        cluster.start_controller()
    end = time.monotonic() + DEADLINE
    while True:
        try:
            state = await manager.state()
            if state.healthy:
                break
        except Transient:
            pass
        assert time.monotonic() < end, "cluster did not come back"
        await asyncio.sleep(0.5)
    # the job survived the controller restart
    status = await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
    assert status.state == RUNNING


async def test_ssh_path(make_manager: Callable[..., SlurmManager], slurm_sshd: SshServer) -> None:
    manager = make_manager(**slurm_sshd.config())
    await manager.connect()
    state = await manager.state()
    assert state.healthy and len(state.nodes) == 2
    spec = make_spec("echo over-ssh; exit 3", envs={"QUOTED": "it's \"x\" $y"})
    spec.run = 'echo "over-ssh $QUOTED"; exit 3'
    await manager.submit([spec])
    status = await wait_state(manager, spec.name, SUCCEEDED, FAILED, deadline=DEADLINE)
    assert status.state == FAILED and status.exit_code == 3
    assert (await manager.logs(spec.name, tail=1)).strip() == "over-ssh it's \"x\" $y"
    await manager.delete([spec.name])
    assert spec.name not in [s.name for s in await manager.replicas()]


async def test_ssh_bad_key_is_permanent(
    make_manager: Callable[..., SlurmManager], slurm_sshd: SshServer,
) -> None:
    manager = make_manager(**slurm_sshd.config(ssh_key_path=str(slurm_sshd.wrong_key)))
    with pytest.raises(Permanent, match="ssh"):
        await manager.connect()
    missing = make_manager(**slurm_sshd.config(ssh_key_path="/nonexistent/key"))
    with pytest.raises(Permanent, match="ssh_key_path"):
        await missing.connect()


async def test_ssh_unreachable_host_is_transient(
    make_manager: Callable[..., SlurmManager], slurm_sshd: SshServer,
) -> None:
    from skyshift.devstack.sim.slurm import free_ports

    manager = make_manager(**slurm_sshd.config(port=free_ports(1)[0]))
    with pytest.raises(Transient):
        await manager.connect()


# ---- the queue SkyShift may fill (issue #16) ------------------------------------------------


async def test_queue_counts_every_pending_request(
    make_manager: Callable[..., SlurmManager], slurm_clusters: list[SimSlurmCluster],
) -> None:
    """With every CPU taken, replicas submitted anyway wait in Slurm's queue: state() reports
    each pending job's request (SkyShift's and a foreign one, GPUs included; a held job not),
    and the bound (queue_depth x the partition's capacity)."""
    sim = slurm_clusters[0]
    manager = make_manager(queue_depth=0.5)
    env = {**os.environ, **sim.env}
    fill = [make_spec("sleep 600", resources=Resources(cpus=sim.node_cpus, memory=100))
            for _ in sim.nodes]
    queued = [make_spec("sleep 600", resources=Resources(cpus=2, memory=500, gpus=1)),
              make_spec("sleep 600", resources=Resources(
                  cpus=1, memory=300, gpus=1, accelerators={sim.gpu_type: 1}))]
    foreign: list[str] = []
    try:
        await manager.submit(fill)
        for spec in fill:
            await wait_state(manager, spec.name, RUNNING, deadline=DEADLINE)
        await manager.submit(queued)
        for args in (["--cpus-per-task=3", "--mem=1G"], ["--hold"]):
            foreign.append(subprocess.run(
                ["sbatch", "--parsable", "--output=/dev/null", *args, "--wrap", "sleep 600"],
                capture_output=True, text=True, check=True, env=env).stdout.strip())
        listing = {s.name: s.state for s in await manager.replicas()}
        assert {listing[s.name] for s in queued} == {"Pending"}
        state = await manager.state()
        assert state.queue is not None
        assert state.queue.jobs == 3
        assert state.queue.queued == Resources(2 + 1 + 3, 500 + 300 + 1024, 2,
                                               {sim.gpu_type: 1})
        nodes = len(sim.nodes)
        assert state.queue.limit == Resources(
            sim.node_cpus * nodes * 0.5, sim.node_memory * nodes * 0.5,
            sim.node_gpus * nodes // 2, {sim.gpu_type: sim.node_gpus * nodes // 2})
    finally:
        if foreign:
            subprocess.run(["scancel", *foreign], check=False, env=env)
