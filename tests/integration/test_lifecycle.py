"""Lifecycles end to end on the real Temporal dev server, etcd and local clusters."""

from __future__ import annotations

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def test_submit_runs_and_succeeds(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-ok")
    await s.cluster_phase("lc-ok", "Ready")
    await s.submit("hello", "echo hi from $SKYSHIFT_RANK; sleep 1", replicas=2)
    running = await s.job_phase("hello", "Running")
    assert running["status"]["placement"] == {"lc-ok": 2}
    done = await s.job_phase("hello", "Succeeded")
    assert done["status"]["replicaStatus"]["lc-ok"]["Succeeded"] == 2
    assert done["status"]["completionTime"]
    assert done["status"]["observedGeneration"] == done["metadata"]["generation"] >= 1
    cluster = await s.get("clusters", "lc-ok")
    assert cluster is not None and cluster["status"]["allocatable"]


async def test_failing_command_restarted_then_failed(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-fail")
    await s.cluster_phase("lc-fail", "Ready")
    await s.submit("crash", "echo attempt; exit 3", restartPolicy="OnFailure", maxRestarts=2)
    failed = await s.job_phase("crash", "Failed")
    assert failed["status"]["restarts"] == 2
    assert "maxRestarts (2)" in failed["status"]["message"]
    assert "exit code 3" in failed["status"]["message"]
    # one replica directory, restarted in place: attempts 0 and 1 kept their logs
    [rdir] = s.replica_dirs("lc-fail")
    logs = sorted(p.name for p in (s.state_dirs["lc-fail"] / "replicas" / rdir).glob("log*"))
    assert logs == ["log", "log.0", "log.1"]


async def test_unschedulable_waits_then_runs_on_new_cluster(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-small", cpus=2)
    await s.cluster_phase("lc-small", "Ready")
    await s.submit("huge", "sleep 0.5", cpus=16)

    async def explained() -> dict | None:
        obj = await s.get("jobs", "huge")
        return obj if obj and obj["status"].get("schedulerReasons") else None

    pending = await s.wait("pending reasons", explained)
    assert pending["status"]["phase"] == "Pending"
    assert "insufficient resources" in pending["status"]["schedulerReasons"]["lc-small"]
    assert "0/1 clusters fit" in pending["status"]["message"]
    await s.add_cluster("lc-big", cpus=32)
    done = await s.job_phase("huge", "Succeeded")
    assert done["status"]["placement"] == {"lc-big": 1}


async def test_spread_by_capacity_and_filters(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-east", cpus=2, labels={"zone": "east"})
    await s.add_cluster("lc-west", cpus=4, labels={"zone": "west"})
    await s.cluster_phase("lc-east", "Ready")
    await s.cluster_phase("lc-west", "Ready")
    # no cluster holds 5 replicas: they spread, the roomier cluster first
    await s.submit("wide", "sleep 30", cpus=1, replicas=5, restartPolicy="Never")
    wide = await s.job_phase("wide", "Running")
    assert wide["status"]["placement"] == {"lc-west": 4, "lc-east": 1}
    await s.submit("picky", "sleep 0.2", cpus=0.1, placement={
        "filters": [{"matchLabels": {"zone": "east"}}]})
    picky = await s.job_phase("picky", "Succeeded")
    assert picky["status"]["placement"] == {"lc-east": 1}
    # one cpu left in all: a two-cpu job waits, never overcommitting either cluster
    await s.submit("third", "sleep 0.2", cpus=2)

    seen: list[dict | None] = [None]

    async def reasons() -> dict | None:
        obj = seen[0] = await s.get("jobs", "third")
        return obj if obj and len(obj["status"].get("schedulerReasons") or {}) == 2 else None

    try:
        third = await s.wait("third pending on both", reasons)
    except AssertionError as exc:
        clusters = {c: (await s.get("clusters", c) or {}).get("status", {}).get("allocatable")
                    for c in ("lc-east", "lc-west")}
        wide_now = await s.get("jobs", "wide")
        raise AssertionError(f"{exc}; third: {seen[0]}; allocatable: {clusters}; "
                             f"wide: {wide_now}") from None
    assert third["status"]["phase"] == "Pending"
    assert len(s.replica_dirs("lc-west")) == 4
    assert "insufficient resources" in third["status"]["schedulerReasons"]["lc-east"]
    assert "insufficient resources" in third["status"]["schedulerReasons"]["lc-west"]


async def test_deletion_kills_replicas_and_removes_object(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-del")
    await s.cluster_phase("lc-del", "Ready")
    await s.submit("forever", "sleep 600", replicas=2, restartPolicy="Always")
    await s.job_phase("forever", "Running")
    assert len(s.replica_dirs("lc-del")) == 2
    await s.delete("jobs", "forever", "default")

    async def gone() -> bool:
        return await s.get("jobs", "forever") is None

    await s.wait("job removed", gone, timeout=30)
    assert s.replica_dirs("lc-del") == []
    assert not list((s.state_dirs["lc-del"] / "trash").glob("*"))


async def test_cluster_lost_fails_over_and_cleans_up_on_return(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-a", cpus=4, labels={"pref": "yes"})
    await s.cluster_phase("lc-a", "Ready")
    await s.submit("mover", "sleep 600", replicas=2, cpus=1, restartPolicy="Always",
                   placement={"preferences": [{"matchLabels": {"pref": "yes"}, "weight": 10}]})
    moved = await s.job_phase("mover", "Running")
    assert moved["status"]["placement"] == {"lc-a": 2}
    await s.add_cluster("lc-b", cpus=4)
    await s.cluster_phase("lc-b", "Ready")
    (s.state_dirs["lc-a"] / "OFFLINE").touch()
    error = await s.cluster_phase("lc-a", "Error", timeout=20)
    assert "unreachable" in error["status"]["message"]

    async def on_b() -> dict | None:
        obj = await s.get("jobs", "mover")
        return obj if obj and obj["status"].get("placement") == {"lc-b": 2} else None

    await s.wait("replicas moved to lc-b", on_b, timeout=20)
    await s.wait("two replicas on lc-b", lambda: _count(s, "lc-b", 2), timeout=20)
    (s.state_dirs["lc-a"] / "OFFLINE").unlink()
    await s.cluster_phase("lc-a", "Ready", timeout=20)
    await s.wait("leftovers on lc-a removed", lambda: _count(s, "lc-a", 0), timeout=20)
    job = await s.get("jobs", "mover")
    assert job is not None and job["status"]["phase"] == "Running"
    assert len(s.replica_dirs("lc-b")) == 2


async def _count(s: LifecycleStack, cluster: str, n: int) -> bool:
    return len(s.replica_dirs(cluster)) == n


async def test_deleting_a_cluster_moves_its_jobs_and_removes_it(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-old", cpus=4, labels={"pref": "yes"})
    await s.cluster_phase("lc-old", "Ready")
    await s.submit("tenant", "sleep 600", cpus=1, restartPolicy="Always",
                   placement={"preferences": [{"matchLabels": {"pref": "yes"}, "weight": 10}]})
    await s.job_phase("tenant", "Running")
    await s.add_cluster("lc-new", cpus=4)
    await s.cluster_phase("lc-new", "Ready")
    await s.delete("clusters", "lc-old")

    async def removed() -> bool:
        return await s.get("clusters", "lc-old") is None

    await s.wait("cluster object removed", removed, timeout=40)
    assert s.replica_dirs("lc-old") == []

    last: list[dict | None] = [None]

    async def moved() -> dict | None:
        obj = last[0] = await s.get("jobs", "tenant")
        return obj if obj and obj["status"].get("placement") == {"lc-new": 1} else None

    try:
        await s.wait("job moved to lc-new", moved, timeout=30)
    except AssertionError as exc:
        new = await s.get("clusters", "lc-new")
        raise AssertionError(f"{exc}; tenant: {last[0]}; lc-new: {new}") from None
    await s.wait("replica on lc-new", lambda: _count(s, "lc-new", 1), timeout=20)

    async def counted_on_new_only() -> dict | None:
        obj = await s.get("jobs", "tenant")
        counts = (obj or {}).get("status", {}).get("replicaStatus") or {}
        return obj if set(counts) == {"lc-new"} else None

    # the deleted cluster's replica counts go with it (nothing would ever update them)
    await s.wait("replica counts of lc-new only", counted_on_new_only, timeout=20)
