"""Submit orders on a real etcd: the control worker's activities write and withdraw them, the
skylet's OrderRunner carries them out (activities.orders, activities.order_runner).

The cluster manager is a fake below the adapter boundary (it records what it was asked), and
the Temporal client one that records signals; the real skylet with real managers runs orders in
every e2e and fault test (tests/faults/test_lifecycle_*.py count lost and duplicated replicas).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from skyshift.activities.clusters import ClusterContext, SkyletActivities
from skyshift.activities.order_runner import OrderRunner
from skyshift.activities.orders import ORDERS, OrderActivities, order_object
from skyshift.compat.base import RESUBMIT
from skyshift.compat.errors import Permanent, Transient
from skyshift.compat.types import ReplicaSpec, ReplicaStatus
from skyshift.contract.jobs import (
    REJECTED,
    JobRef,
    SubmitInput,
    SubmitOrder,
    WithdrawOrders,
    replica_name,
    uid8,
)
from skyshift.contract.names import SIG_CLUSTER, order_name
from skyshift.store import ObjectStore

pytestmark = pytest.mark.asyncio


class Manager:
    """Records each submit and whether it was flagged as possibly done before."""

    def __init__(self, fail: list[Exception] | None = None) -> None:
        self.submits: list[tuple[list[str], bool]] = []
        self.fail = list(fail or [])

    async def connect(self) -> None:
        return None

    async def submit(self, specs: list[ReplicaSpec]) -> list[ReplicaStatus]:
        self.submits.append(([s.name for s in specs], RESUBMIT.get()))
        if self.fail:
            raise self.fail.pop(0)
        return [ReplicaStatus(name=s.name, job_uid=s.job_uid, namespace=s.namespace,
                              job_name=s.job_name, rank=s.rank, state="Running") for s in specs]


class Handle:
    def __init__(self, client: Client, wf_id: str) -> None:
        self.client, self.wf_id = client, wf_id

    async def signal(self, name: str, payload: Any) -> None:
        self.client.signals.append((self.wf_id, name, payload))


class Client:
    def __init__(self) -> None:
        self.signals: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, wf_id: str) -> Handle:
        return Handle(self, wf_id)


async def a_job(store: ObjectStore) -> JobRef:
    uid = str(uuid.uuid4())
    name = f"j{uid[:6]}"
    await store.create("jobs", {"metadata": {"name": name, "namespace": "default", "uid": uid},
                                "spec": {"replicas": 2}, "status": {"phase": "Scheduled"}})
    return JobRef("default", name, uid)


def order(job: JobRef, n: int = 1, cluster: str = "c1", ranks: int = 2) -> SubmitOrder:
    specs = [ReplicaSpec(replica_name(job.name, job.uid, r), job.name, job.namespace, job.uid, r,
                         run="true") for r in range(ranks)]
    return SubmitOrder(order_name(job.uid, n), SubmitInput(job, cluster, specs))


def skylet(store: ObjectStore, manager: Manager) -> tuple[SkyletActivities, Client]:
    client = Client()
    ctx = ClusterContext("c1", manager)  # type: ignore[arg-type]
    return SkyletActivities(ctx, store, client), client  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running(acts: SkyletActivities, settle: float = 0.0,
                  **kwargs: Any) -> AsyncIterator[None]:
    """The cluster's OrderRunner for the block (``settle``: seconds to let it list and watch
    before the block writes orders)."""
    task = asyncio.create_task(OrderRunner(acts, **kwargs).run())
    try:
        await asyncio.sleep(settle)
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(check: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.02)


async def no_orders(store: ObjectStore) -> bool:
    return not (await store.list(ORDERS, "c1")).items


async def test_an_order_is_carried_out_once_and_deleted(store: ObjectStore) -> None:
    job, manager = await a_job(store), Manager()
    acts, client = skylet(store, manager)
    async with running(acts, settle=0.2):
        await OrderActivities(store).post_submit_order(order(job))
        await until(lambda: no_orders(store))
    names = [replica_name(job.name, job.uid, r) for r in range(2)]
    assert manager.submits == [(names, False)]  # written after the runner started: not a retry
    obj = await store.get("jobs", job.name, job.namespace)
    assert obj["status"]["replicaStatus"]["c1"]["Running"] == 2  # counted at once
    # the job is told a round later (held starts), not now
    assert acts.ctx.held.keys() == set(names) and not client.signals


async def test_an_order_left_by_an_earlier_skylet_is_flagged_as_maybe_done(
    store: ObjectStore,
) -> None:
    job, manager = await a_job(store), Manager()
    await OrderActivities(store).post_submit_order(order(job))
    await OrderActivities(store).post_submit_order(order(job))  # a retried local activity
    acts, _ = skylet(store, manager)
    async with running(acts):
        await until(lambda: no_orders(store))
    assert [resubmit for _, resubmit in manager.submits] == [True]


async def test_a_withdrawn_order_is_not_carried_out(store: ObjectStore) -> None:
    """The workflow withdraws its orders before it deletes the job's replicas; an order the
    runner took before that waits for the job's lock (held by the delete) and finds it gone."""
    job, manager = await a_job(store), Manager()
    acts, _ = skylet(store, manager)
    async with running(acts, settle=0.2):
        async with acts.ctx.job_locks.holding([uid8(job.uid)]):  # a delete of the job's
            await OrderActivities(store).post_submit_order(order(job))
            await asyncio.sleep(0.3)  # taken by the runner, waiting for the lock
            gone = await OrderActivities(store).withdraw_submit_orders(
                WithdrawOrders("c1", job.uid))
        await asyncio.sleep(0.3)
    assert gone == 1 and manager.submits == []
    assert await no_orders(store)


async def test_withdrawing_removes_only_that_jobs_orders_on_that_cluster(
    store: ObjectStore,
) -> None:
    one, other = await a_job(store), await a_job(store)
    acts = OrderActivities(store)
    for o in (order(one, 1), order(one, 2), order(other, 1), order(one, 3, cluster="c2")):
        await acts.post_submit_order(o)
    assert await acts.withdraw_submit_orders(WithdrawOrders("c1", one.uid)) == 2
    left = {(o["metadata"]["namespace"], o["metadata"]["name"])
            for c in ("c1", "c2") for o in (await store.list(ORDERS, c)).items}
    assert left == {("c1", order_name(other.uid, 1)), ("c2", order_name(one.uid, 3))}


async def test_a_cluster_that_cannot_take_it_now_gets_it_again(store: ObjectStore) -> None:
    job, manager = await a_job(store), Manager(fail=[Transient("slurmctld is restarting")])
    acts, client = skylet(store, manager)
    async with running(acts, retry=0.2, settle=0.2):
        await OrderActivities(store).post_submit_order(order(job))
        await until(lambda: no_orders(store))
    assert [resubmit for _, resubmit in manager.submits] == [False, True]
    assert not client.signals


async def test_a_refusal_is_told_to_the_job(store: ObjectStore) -> None:
    job, manager = await a_job(store), Manager(fail=[Permanent("image not allowed here")])
    acts, client = skylet(store, manager)
    async with running(acts, settle=0.2):
        await OrderActivities(store).post_submit_order(order(job))
        await until(lambda: no_orders(store))
    [(wf_id, signal, event)] = client.signals
    assert (wf_id, signal) == (f"job/{job.namespace}/{job.name}", SIG_CLUSTER)
    assert event.kind == REJECTED and "image not allowed here" in event.message
    assert len(manager.submits) == 1


async def test_a_forged_order_is_dropped_unrun(store: ObjectStore) -> None:
    """Orders come from the control worker; one that does not hold together (a replica of
    another job, written by anyone who can write etcd) is refused, as the activity refused it."""
    job, other, manager = await a_job(store), await a_job(store), Manager()
    forged = order(job)
    forged.submit.replicas[1] = order(other).submit.replicas[1]
    with pytest.raises(Exception, match="forged or invalid"):
        await OrderActivities(store).post_submit_order(forged)
    await store.create(ORDERS, order_object(forged))  # written around the activity
    acts, _ = skylet(store, manager)
    async with running(acts):
        await until(lambda: no_orders(store))
    assert manager.submits == []
