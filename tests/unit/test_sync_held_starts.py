"""Held starts (activities.sync): a replica's Pending -> Running is counted in etcd at once and
told to its job a round later at the earliest, with the job's other changes.

What a user sees: the job's status in etcd says Running from the round that saw the start;
the job's workflow is told fewer times (a one-second job only that it ended; a job whose
replicas start over several rounds, once), and is always told in the end.

Pure unit test: fake store and Temporal client (below the adapter boundary), no server.
"""

from __future__ import annotations

from typing import Any

from skyshift.activities.clusters import ClusterContext, Seen
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import ReplicaReport
from tests.unit.test_sync_report_cancelled import FakeClient, FakeStore


class Bed:
    """One cluster's skylet table with a job of ``n`` replicas, all told Pending."""

    def __init__(self, n: int = 2, hold: int = 5) -> None:
        self.store, self.client = FakeStore(), FakeClient()
        self.store.job["spec"]["replicas"] = n
        self.ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
        self.n = n
        for r in self.listing(["Pending"] * n):
            self.ctx.table[r.name] = Seen(r.job_uid, r.namespace, r.job_name, r.rank,
                                          r.attempt, r.state)
        self.ctx.listed = set(self.ctx.table)
        self.ctx.primed = True
        self.acts = SkyletWithSync(self.ctx, self.store, self.client)  # type: ignore[arg-type]
        self.cfg = SyncConfig(hold_starts=hold)

    def listing(self, states: list[str]) -> list[ReplicaStatus]:
        return [ReplicaStatus(name=f"job-uid1-{r}", job_uid="uid-1", namespace="default",
                              job_name="job", rank=r, state=state,
                              exit_code=0 if state == "Succeeded" else None)
                for r, state in enumerate(states)]

    async def round(self, *states: str) -> None:
        await Syncer(self.acts, self.cfg)._report(self.listing(list(states)), first=False)

    def told(self) -> list[list[tuple[int, str]]]:
        """Each signal the job got: its (rank, state) updates."""
        out = []
        for _, name, payload in self.client.signals:
            assert name == "replicas_changed" and isinstance(payload, ReplicaReport)
            out.append([(u.rank, u.state) for u in payload.updates])
        return out

    def status(self) -> dict[str, Any]:
        return dict(self.store.job["status"])


async def test_a_short_job_is_told_only_that_it_ended() -> None:
    bed = Bed(n=1)
    await bed.round("Running")
    assert bed.status()["phase"] == "Running"  # etcd says so at once
    assert bed.told() == []
    await bed.round("Succeeded")
    assert bed.told() == [[(0, "Succeeded")]]
    assert bed.status()["replicaStatus"]["c1"]["Succeeded"] == 1


async def test_a_start_is_told_a_round_later() -> None:
    bed = Bed(n=1)
    await bed.round("Running")
    await bed.round("Running")
    assert bed.told() == [[(0, "Running")]]
    await bed.round("Running")  # nothing new: nothing told again
    assert bed.told() == [[(0, "Running")]]


async def test_replicas_starting_over_several_rounds_are_told_once() -> None:
    bed = Bed(n=3)
    await bed.round("Running", "Pending", "Pending")
    await bed.round("Running", "Running", "Pending")
    assert bed.told() == []  # one of them still Pending
    assert bed.status()["replicaStatus"]["c1"]["Running"] == 2
    await bed.round("Running", "Running", "Running")
    assert bed.status()["phase"] == "Running"
    assert bed.told() == [[(0, "Running"), (1, "Running"), (2, "Running")]]


async def test_a_start_rides_along_with_another_change_of_its_job() -> None:
    bed = Bed(n=2)
    await bed.round("Running", "Pending")
    await bed.round("Running", "Failed")
    assert sorted(u for report in bed.told() for u in report) == [(0, "Running"), (1, "Failed")]
    assert len(bed.told()) == 1


async def test_a_start_is_told_at_last_while_a_sibling_stays_pending() -> None:
    bed = Bed(n=2, hold=3)
    await bed.round("Running", "Pending")
    await bed.round("Running", "Pending")
    await bed.round("Running", "Pending")
    assert bed.told() == []
    await bed.round("Running", "Pending")  # hold_starts rounds after the start
    assert bed.told() == [[(0, "Running")]]


async def test_hold_starts_zero_tells_at_once() -> None:
    bed = Bed(n=1, hold=0)
    await bed.round("Running")
    assert bed.told() == [[(0, "Running")]]
