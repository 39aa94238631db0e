"""Deleting a cluster that stops answering right after (``skyctl delete cluster X`` and then the
cluster is shut down): the Cluster object goes, its jobs move, and the user is told that
replicas may be left on it."""

from __future__ import annotations

import time

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def test_delete_then_unreachable_removes_the_cluster(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("ud-old", cpus=4, labels={"pref": "yes"})
    await s.cluster_phase("ud-old", "Ready")
    await s.submit(
        "tenant",
        "sleep 600",
        cpus=1,
        restartPolicy="Always",
        placement={"preferences": [{"matchLabels": {"pref": "yes"}, "weight": 10}]},
    )
    running = await s.job_phase("tenant", "Running")
    assert running["status"]["placement"] == {"ud-old": 1}
    await s.add_cluster("ud-new", cpus=4)
    await s.cluster_phase("ud-new", "Ready")
    await s.delete("clusters", "ud-old")
    (s.state_dirs["ud-old"] / "OFFLINE").touch()
    t0 = time.monotonic()

    async def removed() -> bool:
        return await s.get("clusters", "ud-old") is None

    # within the teardown's own timeout (60 s), which it used to run out on an unreachable
    # cluster: it gives up once the cluster has not answered for lost_after (2 s here)
    await s.wait("cluster object removed", removed, timeout=45)
    print(f"\n[delete-unreachable] removed {time.monotonic() - t0:.1f}s after OFFLINE")
    result = await s.client.get_workflow_handle("cluster/ud-old").result()
    assert result.startswith("Deleted; unreachable: cluster ud-old was deleted while unreachable")
    assert "replicas may be left running on it" in result
    assert "the jobs placed there were told to move elsewhere" in result
    assert len(s.replica_dirs("ud-old")) == 1  # left behind, as the user is told

    async def moved() -> dict | None:
        obj = await s.get("jobs", "tenant")
        return obj if obj and obj["status"].get("placement") == {"ud-new": 1} else None

    await s.wait("job moved to ud-new", moved, timeout=60)
    print(f"[delete-unreachable] job moved {time.monotonic() - t0:.1f}s after OFFLINE")
    await s.wait("replica on ud-new", lambda: _count(s, "ud-new", 1), timeout=30)
    job = await s.job_phase("tenant", "Running")
    assert set(job["status"].get("replicaStatus") or {}) <= {"ud-new"}

    # what the message promises: attached again, the cluster loses the leftover
    (s.state_dirs["ud-old"] / "OFFLINE").unlink()
    await s.add_cluster("ud-old", cpus=4)
    await s.cluster_phase("ud-old", "Ready")
    await s.wait("leftover on ud-old removed", lambda: _count(s, "ud-old", 0), timeout=30)
    assert len(s.replica_dirs("ud-new")) == 1


async def _count(s: LifecycleStack, cluster: str, n: int) -> bool:
    return len(s.replica_dirs(cluster)) == n
