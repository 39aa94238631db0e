"""Issue #12 end to end, every part real: a Cluster with ``provision`` on the simulated Slurm
cluster through SkyPilot 0.14 (the driver as the dedicated ``skyshift-sky`` user), the
``skypilot`` cluster manager running the replicas as SkyPilot jobs, the scheduler asking the
cluster to grow when a job waits, and deletion releasing every SkyPilot cluster and Slurm
allocation. Etcd, the Temporal dev server and the workers are real too (the lifecycle stack).

The cluster here scales from zero (``nodes.min: 0``), so one launch covers growth: what the user
checks is that the Cluster is Ready at once with no SkyPilot cluster behind it; that a 2-replica
job waits saying "provisioning <cluster> (ETA ...)", the cluster grows by a node group and the
job runs there, its output readable through the cluster's manager; that once idle the cluster
goes back to zero nodes (torn down, still Ready); and that deleting it leaves no SkyPilot cluster
and no Slurm job behind.

A cluster launched at create (``min`` >= 1) is the newcomer's path: ``skyshift sim skypilot up``,
the ``skyctl create cluster`` line it prints, a 2-replica job, ``skyctl logs``, all on the
command line, is docs/provisioning.md's block, checked on that page's run
(tests/e2e/test_docs_skypilot.py, tests/e2e/newcomer_checks.py). Growing a cluster that already
has a node group, and idling back to it, is tests/integration/test_provision_lifecycle.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from skyshift.compat.base import create_manager
from skyshift.contract.jobs import replica_name
from skyshift.contract.provision import MINUTE_ENV, sky_name
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_provision_lifecycle import create, gone, status_where

pytestmark = [pytest.mark.integration]

NAME = "pv-e2e"
IDLE_MINUTE_S = 40  # long enough to read the logs first, even on a loaded machine


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
@pytest.mark.timeout(1800)  # a SkyPilot launch, a job, two teardowns: minutes on 2 cores
async def test_cluster_from_zero_grows_for_a_job_idles_back_and_is_released(
    lifecycle_stack: LifecycleStack, sky_slurm: Any, sky_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = lifecycle_stack
    monkeypatch.setenv(MINUTE_ENV, str(IDLE_MINUTE_S))  # idleMinutes: 1 -> IDLE_MINUTE_S s
    s.start_in_process()
    lap = _Laps()
    c = await create(s, NAME, infra=sky_slurm.infra, cpus=2, memory="2G",
                     nodes={"min": 0, "max": 1}, idleMinutes=1)
    sky0 = sky_name(NAME, c["metadata"]["uid"], 0)
    try:
        ready = await s.cluster_phase(NAME, "Ready", timeout=120)
        lap("create -> Ready (no launch)")
        assert not (ready["status"].get("provision") or {}).get("skyClusters"), ready["status"]
        assert "scaled to zero" in ready["status"]["message"], ready["status"]
        assert _ours(sky_slurm.squeue(), [sky0]) == [], sky_slurm.squeue()

        # a 2-replica job waits for the cluster to grow, then runs there as SkyPilot jobs
        pair = await s.submit("pair", "echo rank $SKYSHIFT_RANK of $SKYSHIFT_JOB on skypilot",
                              replicas=2, cpus=1, restartPolicy="Never")
        pending = await s.wait("the pending reason", lambda: _message(
            s, "pair", f"provisioning {NAME}"), timeout=120)
        assert "ETA" in pending
        lap("pair POST -> pending 'provisioning'")
        done = await s.job_phase("pair", "Succeeded", timeout=900)
        lap("pending -> pair Succeeded (the launch from zero)")
        assert done["status"]["placement"] == {NAME: 2}
        assert done["status"]["replicaStatus"][NAME]["Succeeded"] == 2
        grown = await s.get("clusters", NAME)
        assert grown is not None
        assert grown["status"]["provision"]["skyClusters"] == [sky0], grown["status"]
        assert grown["status"]["provision"]["nodes"] == 1
        assert len(_ours(sky_slurm.squeue(), [sky0])) == 1, sky_slurm.squeue()
        await _read_logs([sky0], pair)
        lap("the pair's logs read through the manager")

        # idle for idleMinutes: back to zero nodes, the Cluster still there and Ready
        zero = await status_where(s, NAME, "scaled back to zero", lambda st: st.get(
            "phase") == "Ready" and not (st.get("provision") or {}).get("skyClusters"),
            timeout=300)
        assert "scaled to zero" in zero["status"]["message"], zero["status"]
        lap("idle -> scaled to zero (a teardown)")
        await _released(sky_slurm, sky_client, [sky0])
    finally:
        await s.delete("clusters", NAME)
        await gone(s, NAME, timeout=600)
        lap("delete -> gone")
    await _released(sky_slurm, sky_client, [sky0])
    lap("squeue empty, ABSENT")


async def _released(sky_slurm: Any, sky_client: Any, names: list[str]) -> None:
    """Nothing left of ``names``: neither the SkyPilot clusters nor their Slurm allocations."""
    deadline = time.monotonic() + 60
    while _ours(sky_slurm.squeue(), names) and time.monotonic() < deadline:
        await asyncio.sleep(1)
    assert _ours(sky_slurm.squeue(), names) == [], sky_slurm.squeue()
    states = await asyncio.gather(*(asyncio.to_thread(sky_client.status, n) for n in names))
    assert [st.state for st in states] == ["ABSENT"] * len(names)
