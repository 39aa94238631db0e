"""The skylet tells the scheduler how many replicas of each job it sees for the first time.

A submit creates a job's replicas one by one, so a sync round can list some of them and the next
round the rest. The scheduler holds a reservation for all of them until the cluster accounts
them; with only the job's uid in the report it dropped the whole reservation at the first one,
and a round before the next report could hand the missing replicas' capacity to another job.

Pure unit test: fake store and Temporal client, no server.
"""

from __future__ import annotations

from skyshift.activities.clusters import ClusterContext
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import CapacityChanged
from skyshift.contract.names import SIG_CAPACITY
from tests.unit.test_sync_report_cancelled import FakeClient, FakeStore


def replica(rank: int, uid: str = "uid-1", job: str = "job") -> ReplicaStatus:
    return ReplicaStatus(name=f"{job}-{uid}-{rank}", job_uid=uid, namespace="default",
                         job_name=job, rank=rank, state="Running")


async def test_replicas_appearing_over_two_rounds_are_counted_per_round() -> None:
    store, client = FakeStore(), FakeClient()
    ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    syncer = Syncer(acts, SyncConfig())

    await syncer._report([replica(0), replica(0, "uid-2", "other")], first=False)
    await syncer._report([replica(0), replica(1), replica(0, "uid-2", "other")], first=False)
    await syncer._report([replica(0), replica(1), replica(0, "uid-2", "other")], first=False)

    told = [p for _, name, p in client.signals if name == SIG_CAPACITY]
    assert all(isinstance(p, CapacityChanged) for p in told)
    assert [(p.seen_uids, p.seen_counts) for p in told] == [
        (["uid-1", "uid-2"], {"uid-1": 1, "uid-2": 1}),
        (["uid-1"], {"uid-1": 1}),  # the second replica of uid-1; nothing new afterwards
    ]
