"""A replica change whose signal was not delivered (Temporal unavailable, overloaded) is reported
again by the next sync round, and a gone workflow is simply skipped.

``signal_all`` used to log such failures and carry on, so the skylet's table said "told" for a
job that never heard of its replica's new state: the job could stay Running forever after its
replica had ended. Pure unit test: fake store and Temporal client, no server.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from skyshift.activities.clusters import ClusterContext, Seen, SignalsFailed, signal_all
from skyshift.activities.sync import SkyletWithSync, SyncConfig, Syncer
from tests.unit.test_sync_report_cancelled import FakeStore, replicas


class FlakyClient:
    """Signals fail with ``status`` while ``failing`` is set, else they are recorded."""

    def __init__(self) -> None:
        self.signals: list[tuple[str, str, Any]] = []
        self.failing: RPCStatusCode | None = None

    def get_workflow_handle(self, wf_id: str) -> Any:
        client = self

        class Handle:
            async def signal(self, name: str, payload: Any) -> None:
                if client.failing is not None:
                    raise RPCError("injected", client.failing, b"")
                client.signals.append((wf_id, name, payload))

        return Handle()


async def test_undelivered_signal_is_reported_next_round() -> None:
    store, client = FakeStore(), FlakyClient()
    ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
    for r in replicas("Running"):
        ctx.table[r.name] = Seen(r.job_uid, r.namespace, r.job_name, r.rank, r.attempt, r.state)
    ctx.listed = set(ctx.table)
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    done = replicas("Succeeded")

    client.failing = RPCStatusCode.UNAVAILABLE
    with pytest.raises(SignalsFailed, match="replicas_changed not delivered to 1 workflow"):
        await Syncer(acts, SyncConfig())._report(done, first=False)
    assert {s.state for s in ctx.table.values()} == {"Running"}  # undone: not told

    client.failing = None
    await Syncer(acts, SyncConfig())._report(done, first=False)
    told = [p for _, name, p in client.signals if name == "replicas_changed"]
    assert [u.state for p in told for u in p.updates] == ["Succeeded", "Succeeded"]


async def test_gone_workflows_are_skipped_not_failed() -> None:
    client = FlakyClient()
    client.failing = RPCStatusCode.NOT_FOUND
    assert await signal_all(client, {"job/a/b": 1, "job/a/c": 2}, "x") == []  # type: ignore[arg-type]
    client.failing = None
    assert await signal_all(client, {"job/a/b": 1}, "x") == ["job/a/b"]  # type: ignore[arg-type]


class SchedulerDownClient(FlakyClient):
    """Only the scheduler workflow's signals fail (with ``failing``)."""

    def get_workflow_handle(self, wf_id: str) -> Any:
        client = self

        class Handle:
            async def signal(self, name: str, payload: Any) -> None:
                if wf_id == "scheduler" and client.failing is not None:
                    raise RPCError("injected", client.failing, b"")
                client.signals.append((wf_id, name, payload))

        return Handle()


async def test_undelivered_capacity_report_is_sent_again_next_round() -> None:
    """New replicas are reported to the scheduler so it drops its reservations for them; a
    report lost to an overloaded Temporal used to be swallowed, and the reservations were held
    (counted twice with the allocatable) until they expired, keeping fitting jobs pending."""
    store, client = FakeStore(), SchedulerDownClient()
    ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    running = replicas("Running")

    client.failing = RPCStatusCode.DEADLINE_EXCEEDED
    with pytest.raises(SignalsFailed, match="capacity not delivered"):
        await Syncer(acts, SyncConfig())._report(running, first=False)
    assert not ctx.listed  # undone: the replicas count as new again

    client.failing = None
    await Syncer(acts, SyncConfig())._report(running, first=False)
    [capacity] = [p for wf, name, p in client.signals if name == "capacity"]
    assert capacity.seen_counts == {running[0].job_uid: len(running)}


async def test_no_scheduler_yet_is_not_a_failure() -> None:
    store, client = FakeStore(), SchedulerDownClient()
    ctx = ClusterContext("c1", manager=None)  # type: ignore[arg-type]
    ctx.primed = True
    acts = SkyletWithSync(ctx, store, client)  # type: ignore[arg-type]
    client.failing = RPCStatusCode.NOT_FOUND
    await Syncer(acts, SyncConfig())._report(replicas("Running"), first=False)
    assert ctx.listed
