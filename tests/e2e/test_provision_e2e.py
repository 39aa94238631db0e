"""Issue #12 end to end, every part real: a Cluster with ``provision`` on the simulated Slurm
cluster through SkyPilot 0.14 (the driver as the dedicated ``skyshift-sky`` user), the
``skypilot`` cluster manager running the replicas as SkyPilot jobs, the scheduler asking the
cluster to grow when a job waits, and deletion releasing every SkyPilot cluster and Slurm
allocation. Etcd, the Temporal dev server and the workers are real too (the lifecycle stack).

What the user checks: the Cluster goes Ready with its SkyPilot cluster in ``status.provision``;
a 2-replica job runs there, its output readable through the cluster's manager; a job that does
not fit waits saying "provisioning <cluster> (ETA ...)", the cluster grows by a node group and
the job runs; deleting the Cluster leaves no SkyPilot cluster and no Slurm job behind.

The newcomer's path (``skyshift sim skypilot up``, the ``skyctl create cluster`` line it prints,
a 2-replica job, ``skyctl logs``, all on the command line) is docs/provisioning.md's block: it
is checked on that page's run (tests/e2e/test_docs_skypilot.py, tests/e2e/newcomer_checks.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from skyshift.compat.base import create_manager
from skyshift.contract.jobs import replica_name
from skyshift.contract.provision import sky_name
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_provision_lifecycle import create, gone, status_where

pytestmark = [pytest.mark.integration]

NAME = "pv-e2e"


async def _message(s: LifecycleStack, job: str, words: str) -> str | None:
    obj = await s.get("jobs", job, "default")
    message = str(((obj or {}).get("status") or {}).get("message") or "")
    return message if words in message else None


class _Laps:
    """Where the test's minutes go: each step's seconds, printed as it ends (``-s``)."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        print(f"{step}: {now - self.last:.1f} s (at {now - self.start:.1f} s)", flush=True)
        self.last = now


async def _read_logs(sky_clusters: list[str], pair: dict[str, Any]) -> None:
    """Both replicas' logs through the cluster's manager, read at once as ``skyctl logs``
    reads them: each says what its replica printed."""
    manager = create_manager(NAME, "skypilot", {"sky_clusters": sky_clusters})
    await manager.connect()
    try:
        texts = await asyncio.gather(*(manager.logs(replica_name(
            "pair", pair["metadata"]["uid"], rank)) for rank in range(2)))
        for rank, text in enumerate(texts):
            assert f"rank {rank} of pair on skypilot" in text, text
    finally:
        await manager.close()


def _ours(lines: list[str], names: list[str]) -> list[str]:
    """squeue lines (``id user name state``) of the SkyPilot clusters ``names``."""
    return [line for line in lines if any(n in line.split()[2] for n in names)]


@pytest.mark.asyncio
@pytest.mark.timeout(1800)  # two SkyPilot launches, jobs, two teardowns: minutes on 2 cores
async def test_provisioned_cluster_runs_jobs_grows_and_is_released(
    lifecycle_stack: LifecycleStack, sky_slurm: Any, sky_client: Any,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    lap = _Laps()
    read: asyncio.Task[None] | None = None
    c = await create(s, NAME, infra=sky_slurm.infra, cpus=2, memory="2G",
                     nodes={"min": 1, "max": 2})
    uid = c["metadata"]["uid"]
    sky0, sky1 = sky_name(NAME, uid, 0), sky_name(NAME, uid, 1)
    try:
        # Past the launch's own timeout (900 s): in one fresh-machine run the SkyPilot cluster
        # was up 30 s in but the Cluster not Ready 600 s later; a launch call that hangs is
        # given up at its timeout and retried (idempotent), which is what a user would see.
        ready = await s.cluster_phase(NAME, "Ready", timeout=1000)
        lap("create -> Ready (the launch)")
        block = ready["status"]["provision"]
        assert block["skyClusters"] == [sky0] and block["nodes"] == 1, block
        assert _ours(sky_slurm.squeue(), [sky0]), sky_slurm.squeue()

        # a 2-replica job runs on it, as SkyPilot jobs, and says what it printed
        pair = await s.submit("pair", "echo rank $SKYSHIFT_RANK of $SKYSHIFT_JOB on skypilot",
                              replicas=2, cpus=1, restartPolicy="Never")
        done = await s.job_phase("pair", "Succeeded", timeout=300)
        lap("2-replica job POST -> Succeeded")
        assert done["status"]["placement"] == {NAME: 2}
        assert done["status"]["replicaStatus"][NAME]["Succeeded"] == 2
        # its logs are read while the next jobs go on (the test's own wait, not SkyShift's)
        read = asyncio.create_task(_read_logs(block["skyClusters"], pair))

        # the node group's 2 CPUs held by one job; the next one waits for a new group. (Hold
        # Running, not just placed: the scheduler's reservation for a placed job lasts 30 s,
        # then only the cluster's report that it runs keeps the next job off its CPUs.)
        await s.submit("hold", "sleep 600", cpus=2, restartPolicy="Never")
        await s.job_phase("hold", "Running", timeout=300)
        lap("hold POST -> Running")
        await read
        lap("the pair's logs read through the manager (beside hold's start)")
        await s.submit("more", "echo grown", cpus=2, restartPolicy="Never")
        pending = await s.wait("the pending reason", lambda: _message(
            s, "more", f"provisioning {NAME}"), timeout=120)
        assert "ETA" in pending
        lap("more POST -> pending 'provisioning'")
        grown = await s.job_phase("more", "Succeeded", timeout=600)
        lap("pending -> more Succeeded (the grow's launch)")
        assert grown["status"]["placement"] == {NAME: 1}
        cluster = await status_where(s, NAME, "two node groups", lambda st: st.get(
            "provision", {}).get("skyClusters") == [sky0, sky1], timeout=60)
        assert cluster["status"]["provision"]["nodes"] == 2
        assert len(_ours(sky_slurm.squeue(), [sky0, sky1])) == 2, sky_slurm.squeue()
    finally:
        if read is not None and not read.done():
            read.cancel()
        await s.delete("clusters", NAME)
        await gone(s, NAME, timeout=600)
        lap("delete -> gone (the downs)")
    # nothing left: neither SkyPilot cluster, nor their Slurm allocations
    deadline = time.monotonic() + 60
    while _ours(sky_slurm.squeue(), [sky0, sky1]) and time.monotonic() < deadline:
        await asyncio.sleep(1)
    assert _ours(sky_slurm.squeue(), [sky0, sky1]) == [], sky_slurm.squeue()
    states = await asyncio.gather(*(asyncio.to_thread(sky_client.status, n) for n in (sky0, sky1)))
    assert [st.state for st in states] == ["ABSENT", "ABSENT"]
    lap("squeue empty, both ABSENT")
