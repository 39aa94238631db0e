"""A sync round cancelled half-way must not lose replica changes (bug found by bench/k8s_scale.py,
fixed in 46a2075).

``Syncer._report`` recorded each replica's new state in the skylet's table ("what the job was
told") *before* it wrote the job's counts and signalled the job. When the round was cancelled in
between (the sync activity's heartbeat timeout: a 1,000-job burst makes one round write hundreds
of jobs one CAS at a time, without heartbeating), the retried activity found the table already
saying Running and never told the job: it stayed Scheduled with its replicas counted Pending
although every pod runs. Seen on 3 x 100 kwok nodes, 1,000 jobs x 4: 19 jobs stuck for good,
skylet log full of ``sync_cluster ... Activity cancelled`` in ``_report -> write_counts``.

Pure unit test: fake store and Temporal client, no server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skyshift.activities.clusters import ClusterContext, Seen
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus


def new_job() -> dict[str, Any]:
    return {"metadata": {"name": "job", "namespace": "default", "uid": "uid-1"},
            "spec": {"replicas": 2}, "status": {"phase": "Scheduled"}}


class FakeStore:
    """guaranteed_update on one job object; ``cancel_next`` makes the next call be cancelled
    the way Temporal cancels a timed-out activity (CancelledError out of the etcd call)."""

    def __init__(self) -> None:
        self.job = new_job()
        self.cancel_next = False

    async def guaranteed_update(self, plural: str, name: str, namespace: str | None,
                                mutate: Any) -> dict[str, Any]:
        if self.cancel_next:
            self.cancel_next = False
            raise asyncio.CancelledError("Activity cancelled")
        out = mutate(self.job)
        if out is not None:
            self.job = out
        return self.job


class FakeHandle:
    def __init__(self, client: FakeClient, wf_id: str) -> None:
        self.client, self.wf_id = client, wf_id

    async def signal(self, name: str, payload: Any) -> None:
        self.client.signals.append((self.wf_id, name, payload))


class FakeClient:
    def __init__(self) -> None:
        self.signals: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, wf_id: str) -> FakeHandle:
        return FakeHandle(self, wf_id)


def replicas(state: str) -> list[ReplicaStatus]:
    return [ReplicaStatus(name=f"job-uid1-{r}", job_uid="uid-1", namespace="default",
                          job_name="job", rank=r, state=state) for r in range(2)]


async def test_cancelled_round_is_reported_again() -> None:
    store, client = FakeStore(), FakeClient()
    ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
    # what submit_replicas left: both replicas told Pending, listed, primed
    for r in replicas("Pending"):
        ctx.table[r.name] = Seen(r.job_uid, r.namespace, r.job_name, r.rank, r.attempt, r.state)
    ctx.listed = set(ctx.table)
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    running = replicas("Running")

    # round 1: both replicas now Running; cancelled while writing the job's counts
    store.cancel_next = True
    with pytest.raises(asyncio.CancelledError):
        await Syncer(acts, SyncConfig())._report(running, first=False)

    # the retried sync activity sees the same listing, and so does its next round (a start
    # is told to the job a round after it was counted: activities.sync, "held starts")
    await Syncer(acts, SyncConfig())._report(running, first=False)
    await Syncer(acts, SyncConfig())._report(running, first=False)

    counts = store.job["status"].get("replicaStatus", {}).get("c1", {})
    assert counts.get("Running") == 2, f"the job never learnt its replicas run: {store.job}"
    assert store.job["status"]["phase"] == "Running"
    told = [p for _, name, p in client.signals if name == "replicas_changed"]
    assert [u.state for p in told for u in p.updates] == ["Running", "Running"]
