"""A sync round's listing taken before a delete must not bring the deleted replicas back.

Found by CI (test_quota_beds, Kubernetes): a gang of 2 pods was preempted; its workflow deleted
the pods (the delete activity forgot them in the skylet's table) and wrote the job Pending with
no placement and no counts. A sync round that had listed the pods just before the delete then
reported them: recorded again as Running, counted, and the job written back to Running, where it
stayed (``merge_counts`` moves Pending to Running, nothing moves it back) while it waited in the
queue with no replica anywhere.

Pure unit test: a fake store and client, a fake manager below the adapter boundary; the delete
activity, the table and the round's report are the real code.
"""

from __future__ import annotations

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import DeleteReplicasInput
from tests.unit.sync_fakes import OneJobStore, SignalRecorder

NAMES = [f"gang-uid1-{r}" for r in range(2)]


def gang() -> OneJobStore:
    return OneJobStore({
        "metadata": {"name": "gang", "namespace": "ns", "uid": "uid-1"},
        "spec": {"replicas": 2},
        "status": {"phase": "Running", "placement": {"c1": 2},
                   "replicaStatus": {"c1": {"Running": 2}}},
    })


def evicted(store: OneJobStore) -> None:
    """The workflow's write after the delete: back to the queue."""
    store.job["status"] = {"phase": "Pending", "placement": {}, "replicaStatus": {}}


class Manager:
    def __init__(self) -> None:
        self.pods = set(NAMES)

    async def connect(self) -> None:
        return None

    async def delete(self, names: list[str]) -> None:
        self.pods -= set(names)

    def listing(self) -> list[ReplicaStatus]:
        return [ReplicaStatus(name=n, job_uid="uid-1", namespace="ns", job_name="gang",
                              rank=int(n[-1]), state="Running") for n in sorted(self.pods)]


def running_stack() -> tuple[ClusterContext, SkyletWithSync, OneJobStore, Manager]:
    manager, store = Manager(), gang()
    ctx = ClusterContext("c1", manager)  # type: ignore[arg-type]
    ctx.record(manager.listing())
    ctx.listed, ctx.primed = set(NAMES), True
    return ctx, SkyletWithSync(ctx, store, SignalRecorder()), store, manager  # type: ignore[arg-type]


async def evict(acts: SkyletWithSync, store: OneJobStore) -> None:
    await acts._delete_replicas(DeleteReplicasInput("c1", names=NAMES))
    evicted(store)


async def test_a_listing_from_before_the_delete_leaves_the_evicted_job_pending() -> None:
    ctx, acts, store, manager = running_stack()
    mark = ctx.forgets
    listing = manager.listing()  # the round lists both pods ...
    await evict(acts, store)  # ... then the preemption deletes them and requeues the job
    await Syncer(acts, SyncConfig())._report(ctx.since(listing, mark), first=False)
    assert store.job["status"]["phase"] == "Pending", store.job["status"]
    assert store.job["status"]["replicaStatus"] == {}
    assert ctx.table == {}
    # the next round lists what the cluster has now: nothing comes back, nothing is reported
    mark = ctx.forgets
    await Syncer(acts, SyncConfig())._report(ctx.since(manager.listing(), mark), first=False)
    assert store.job["status"]["phase"] == "Pending"
    assert ctx.forgotten == {}  # settled forgets are dropped, not kept for ever
    assert acts.client.signals == []  # type: ignore[attr-defined]


async def test_without_the_mark_the_stale_listing_writes_the_job_running() -> None:
    """The failure the mark prevents: the same round, its listing taken as it is."""
    _ctx, acts, store, manager = running_stack()
    listing = manager.listing()
    await evict(acts, store)
    await Syncer(acts, SyncConfig())._report(listing, first=False)
    assert store.job["status"]["phase"] == "Running"


async def test_a_replica_submitted_again_after_the_forget_is_kept() -> None:
    """A rank deleted and submitted again (a higher attempt) is in the table from its submit;
    the stale listing neither drops nor overwrites it."""
    ctx, acts, _store, manager = running_stack()
    mark = ctx.forgets
    listing = manager.listing()
    await acts._delete_replicas(DeleteReplicasInput("c1", names=NAMES[:1]))
    again = ReplicaStatus(name=NAMES[0], job_uid="uid-1", namespace="ns", job_name="gang",
                          rank=0, attempt=1, state="Pending")
    ctx.record([again])
    await Syncer(acts, SyncConfig())._report(ctx.since(listing, mark), first=False)
    assert ctx.table[NAMES[0]].attempt == 1 and ctx.table[NAMES[0]].state == "Pending"
    assert ctx.table[NAMES[1]].state == "Running"
