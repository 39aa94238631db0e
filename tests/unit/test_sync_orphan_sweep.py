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

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SWEEP_GETS, SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
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


def listing(n: int) -> list[ReplicaStatus]:
    return [ReplicaStatus(name=f"r-u{i}", job_uid=f"u{i}", namespace="ns", job_name=f"j{i}",
                          rank=0, state="Running") for i in range(n)]


def syncer(jobs: list[dict[str, Any]], sweep: float = 60.0) -> tuple[Syncer, Store, Manager]:
    store, manager = Store(jobs), Manager()
    ctx = ClusterContext("c1", manager=manager)  # type: ignore[arg-type]
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client=None)  # type: ignore[arg-type]
    return Syncer(acts, SyncConfig(orphan_sweep=sweep)), store, manager


@pytest.mark.parametrize("n", [3, SWEEP_GETS + 700])
async def test_sweep_removes_replicas_of_deleted_or_moved_jobs_only(n: int) -> None:
    """Of n jobs with a replica here: j0 deleted, j1 reused by a newer job (other uid), j2 now
    placed elsewhere; the others are still placed here and keep their replicas."""
    jobs = [stored_job(f"j{i}", f"u{i}", "c1") for i in range(1, n)]
    jobs[0]["metadata"]["uid"] = "newer"
    jobs[1]["status"]["placement"] = {"c2": 1}
    s, store, manager = syncer(jobs)
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
