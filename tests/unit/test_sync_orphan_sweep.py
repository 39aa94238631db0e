"""The skylet sweeps a Ready cluster for replicas of deleted jobs, not only when it comes back.

A job's teardown gives up on a cluster after ``teardown_timeout``; deleting 1,000 jobs at once
(bench/k8s_scale.py) queued enough delete activities on a skylet's queue that four of them ran
out of that time with the cluster in good health, and their 12 pods stayed: the sweep ran only
on a sync loop's first round or on the cluster's return, neither of which came.

Pure unit test: fake store (get and paginated list) and a fake manager below the adapter
boundary; the sweep itself and the syncer's decision are the real code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SWEEP_GETS, SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import DRIFT, ClusterEvent, JobState, ReplicaRecord
from skyshift.store import NotFound


def stored_job(name: str, uid: str, placed_on: str | None) -> dict[str, Any]:
    placement = {placed_on: 1} if placed_on else {}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid},
            "status": {"phase": "Running", "placement": placement}}


@dataclass
class Page:
    items: list[dict[str, Any]]
    continue_token: str | None


class Store:
    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = {j["metadata"]["name"]: j for j in jobs}
        self.gets = self.lists = 0

    async def get(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if name not in self.jobs:
            raise NotFound(f"{plural}/{name}")
        return self.jobs[name]

    async def list(self, plural: str, limit: int = 0,
                   continue_token: str | None = None) -> Page:
        self.lists += 1
        items = sorted(self.jobs.values(), key=lambda j: j["metadata"]["name"])
        start = int(continue_token or 0)
        end = start + limit
        return Page(items[start:end], str(end) if end < len(items) else None)

    async def guaranteed_update(self, *args: Any) -> dict[str, Any]:
        return {}


class Manager:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete_job(self, uid: str) -> list[str]:
        self.deleted.append(uid)
        return [f"r-{uid}"]


class Handle:
    def __init__(self, client: Client, wf_id: str) -> None:
        self.client, self.wf_id = client, wf_id

    async def query(self, name: str, result_type: type) -> JobState:
        self.client.queries.append(self.wf_id)
        answer = self.client.states.get(self.wf_id)
        if answer is None:
            raise RPCError("no such workflow", RPCStatusCode.NOT_FOUND, b"")
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def signal(self, name: str, arg: Any) -> None:
        self.client.signals.append((self.wf_id, name, arg))


class Client:
    """Temporal as the sweep sees it: each job workflow's state (where it holds replicas)."""

    def __init__(self, states: dict[str, JobState | Exception] | None = None) -> None:
        self.states = states or {}
        self.queries: list[str] = []
        self.signals: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, wf_id: str) -> Handle:
        return Handle(self, wf_id)


def holding(cluster: str) -> JobState:
    return JobState(phase="Running", replicas=[ReplicaRecord(0, cluster, state="Running")])


def listing(n: int) -> list[ReplicaStatus]:
    return [ReplicaStatus(name=f"r-u{i}", job_uid=f"u{i}", namespace="ns", job_name=f"j{i}",
                          rank=0, state="Running") for i in range(n)]


def syncer(jobs: list[dict[str, Any]], sweep: float = 60.0,
           client: Client | None = None) -> tuple[Syncer, Store, Manager]:
    store, manager = Store(jobs), Manager()
    ctx = ClusterContext("c1", manager=manager)  # type: ignore[arg-type]
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client=client or Client())  # type: ignore[arg-type]
    return Syncer(acts, SyncConfig(orphan_sweep=sweep)), store, manager


@pytest.mark.parametrize("n", [3, SWEEP_GETS + 700])
async def test_sweep_removes_replicas_of_deleted_or_moved_jobs_only(n: int) -> None:
    """Of n jobs with a replica here: j0 deleted, j1 reused by a newer job (other uid), j2 now
    placed elsewhere; the others are still placed here and keep their replicas."""
    jobs = [stored_job(f"j{i}", f"u{i}", "c1") for i in range(1, n)]
    jobs[0]["metadata"]["uid"] = "newer"
    jobs[1]["status"]["placement"] = {"c2": 1}
    s, store, manager = syncer(jobs, client=Client({"job/ns/j2": holding("c2")}))
    left = await s._cleanup_orphans(listing(n))
    assert sorted(manager.deleted) == ["u0", "u1", "u2"]
    assert sorted(r.job_uid for r in left) == sorted(f"u{i}" for i in range(3, n))
    if n > SWEEP_GETS:  # a busy cluster: one paginated listing, not a read per job
        assert store.gets == 0 and store.lists == (n - 1 + 499) // 500
    else:
        assert store.lists == 0 and store.gets == n


def test_a_ready_cluster_is_swept_once_per_interval() -> None:
    s, _, _ = syncer([], sweep=60.0)
    assert s._sweep_due(first=True, phase="Ready")
    assert s._sweep_due(first=False, phase="Error")  # coming back
    s.ctx.swept = time.monotonic()
    assert not s._sweep_due(first=False, phase="Ready")
    s.ctx.swept = time.monotonic() - 61
    assert s._sweep_due(first=False, phase="Ready")


async def test_sweep_keeps_replicas_the_workflow_holds_whatever_etcd_says() -> None:
    """Issue 32: etcd's placement of j1 was overwritten to name c2 while its workflow submitted
    to c1 and its replica runs here. The sweep asks the workflow, keeps the replica, and tells the
    workflow (which writes its placement back). j2's workflow cannot be asked (Temporal down):
    nothing is removed on etcd's word alone. j3 has no workflow at all: etcd is all there is."""
    jobs = [stored_job(f"j{i}", f"u{i}", "c2") for i in range(4)]
    down = RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
    client = Client({"job/ns/j0": holding("c2"), "job/ns/j1": holding("c1"), "job/ns/j2": down})
    s, _, manager = syncer(jobs, client=client)
    left = await s._cleanup_orphans(listing(4))
    assert sorted(manager.deleted) == ["u0", "u3"]
    assert sorted(r.job_uid for r in left) == ["u1", "u2"]
    assert client.signals == [("job/ns/j1", "cluster_event",
                               ClusterEvent("c1", DRIFT, client.signals[0][2].message))]
