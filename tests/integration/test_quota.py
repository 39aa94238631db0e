"""Quotas on the real Temporal dev server, etcd and a local cluster: a job over its namespace's
quota waits Pending naming the quota, and is admitted when room frees or the quota is raised."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


def quota(name: str, ns: str, **hard: Any) -> dict[str, Any]:
    return {"apiVersion": "skyshift.io/v1", "kind": "Quota",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "generation": 1},
            "spec": {"hard": hard}, "status": {}}


async def test_job_over_quota_waits_then_runs_when_room_frees(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("qa-c", cpus=8)
    await s.cluster_phase("qa-c", "Ready")
    await s.store.create("quotas", quota("team", "qa", cpus=1))
    await s.submit("first", "sleep 3", ns="qa", cpus=1, restartPolicy="Never")
    await s.job_phase("first", "Running", ns="qa")
    await s.submit("second", "true", ns="qa", cpus=1, restartPolicy="Never")
    await s.submit("elsewhere", "true", ns="qb", cpus=1, restartPolicy="Never")

    async def waiting() -> dict[str, Any] | None:
        obj = await s.get("jobs", "second", "qa")
        return obj if obj and "Quota" in obj["status"].get("message", "") else None

    pending = await s.wait("second waits for quota", waiting)
    assert pending["status"]["phase"] == "Pending"
    assert pending["status"]["message"] == (
        "waiting for quota: over Quota qa/team: cpus 1 of 1 used, needs 1 more")
    await s.job_phase("elsewhere", "Succeeded", ns="qb")  # another namespace is not bounded

    async def used(cpus: float) -> dict[str, Any] | None:
        obj = await s.get("quotas", "team", "qa")
        return obj if obj and obj["status"].get("used") == {"cpus": cpus} else None

    await s.wait("quota shows the running job", lambda: used(1.0))
    await s.job_phase("first", "Succeeded", ns="qa")
    done = await s.job_phase("second", "Succeeded", ns="qa")
    assert done["status"]["placement"] == {"qa-c": 1}
    await s.wait("quota back to nothing used", lambda: used(0.0))


async def test_raising_a_quota_admits_the_waiting_job(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("qr-c", cpus=8)
    await s.cluster_phase("qr-c", "Ready")
    await s.store.create("quotas", quota("none", "qr", jobs=0))
    await s.submit("held", "true", ns="qr", restartPolicy="Never")

    async def waiting() -> dict[str, Any] | None:
        obj = await s.get("jobs", "held", "qr")
        return obj if obj and "Quota qr/none" in obj["status"].get("message", "") else None

    pending = await s.wait("held waits for quota", waiting)
    assert "jobs: the job alone needs 1, over the hard limit 0" in pending["status"]["message"]

    def raise_it(obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"]["hard"] = {"jobs": 1}
        return obj

    await s.store.guaranteed_update("quotas", "none", "qr", raise_it)
    await s.job_phase("held", "Succeeded", ns="qr")


async def test_a_namespace_borrows_what_its_cohort_leaves_unused(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("qc-c", cpus=8)
    await s.cluster_phase("qc-c", "Ready")
    for ns, cpus in (("qca", 1), ("qcb", 1)):
        q = quota("share", ns, cpus=cpus)
        q["spec"]["cohort"] = "pool"
        await s.store.create("quotas", q)
    for name in ("one", "two"):
        await s.submit(name, "sleep 4", ns="qca", cpus=1, restartPolicy="Never")
        await s.job_phase(name, "Running", ns="qca")

    async def borrowed() -> dict[str, Any] | None:
        obj = await s.get("quotas", "share", "qca")
        return obj if obj and obj["status"].get("borrowed") == {"cpus": 1.0} else None

    shown = await s.wait("qca shows what it borrowed", borrowed)
    assert shown["status"]["used"] == {"cpus": 2.0}
    await s.submit("three", "true", ns="qca", cpus=1, restartPolicy="Never")

    async def waiting() -> dict[str, Any] | None:
        obj = await s.get("jobs", "three", "qca")
        return obj if obj and "cohort pool" in obj["status"].get("message", "") else None

    pending = await s.wait("the third waits for the cohort", waiting)
    assert pending["status"]["message"].endswith("and cohort pool has 0 unused")
    await s.job_phase("three", "Succeeded", ns="qca", timeout=90)
