"""JobWorkflow with submit orders (lifecycle revision SUBMIT_ORDERS, what new jobs get): what
only this lifecycle does. Every scenario of test_job_workflow.py also runs on it.

An order is withdrawn before any delete of the job's replicas on its cluster (the skylet never
carries one out after that delete), a refusal from the cluster fails the job, and the history of
a job that runs to success has no activity task at all."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import (
    REJECTED,
    REVISION,
    SUBMIT_ORDERS,
    ClusterEvent,
    JobConfig,
    JobInput,
    JobTemplate,
    Placement,
    ReadJobResult,
    Requeue,
    SpecChanged,
)
from skyshift.contract.names import (
    SIG_CLUSTER,
    SIG_ENSURE,
    SIG_PLACED,
    SIG_REQUEUE,
    SIG_SPEC,
    order_name,
)
from skyshift.workflows.job import JobWorkflow
from tests.workflows.fakes import Fakes, cpus, unique, workers
from tests.workflows.record import replays
from tests.workflows.test_job_workflow import place, report, start

pytestmark = pytest.mark.asyncio


def job(replicas: int = 1, policy: str = "OnFailure") -> JobInput:
    assert REVISION >= SUBMIT_ORDERS  # what the API's starter gives a new job
    return JobInput(
        namespace="ns", name=unique("j"), uid=str(uuid.uuid4()), generation=1, created=1.0,
        template=JobTemplate(run="true", resources=cpus(1), replicas=replicas,
                             restart_policy=policy),
        config=JobConfig(backoff_base=1.0, backoff_max=8.0), revision=REVISION,
    )


def order_of(call: tuple[str, object]) -> str:
    """The cluster an order or withdrawal is for, for asserting on their order."""
    name, payload = call
    if name == "post_submit_order":
        return f"order {payload.submit.cluster}"  # type: ignore[attr-defined]
    return f"{name} {payload.cluster}"  # type: ignore[attr-defined]


def sequence(fakes: Fakes) -> list[str]:
    keep = ("post_submit_order", "withdraw_submit_orders", "delete_replicas")
    return [order_of(c) for c in fakes.calls if c[0] in keep]


async def test_a_job_that_succeeds_schedules_no_activity(workflow_env: WorkflowEnvironment) -> None:
    """The replicas start from an order (one local activity: a marker), and the history holds
    no activity task: the 6 events and the workflow task a submit activity cost are gone."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        order = (await fakes.wait_for("post_submit_order"))[0]
        assert order.name == order_name(inp.uid, 1)
        assert order.submit.cluster == a and [r.rank for r in order.submit.replicas] == [0, 1]
        for rank in (0, 1):
            await report(h, inp, a, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
        types = [e.event_type async for e in h.fetch_history_events()]
        await replays(h, "job_orders_succeeded")
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
    assert not fakes.of("withdraw_submit_orders")  # nothing to withdraw from a finished job


async def test_a_restart_is_a_new_order_for_the_next_attempt(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await fakes.wait_for("post_submit_order")
        await report(h, inp, a, 0, 0, "Failed", 3)
        await workflow_env.sleep(1.0)  # the backoff
        again = (await fakes.wait_for("post_submit_order", 2))[1]
        assert again.name == order_name(inp.uid, 2)
        assert again.submit.replicas[0].attempt == 1
        await report(h, inp, a, 0, 1, "Succeeded", 0)
        assert await h.result() == "Succeeded"


async def test_a_lost_clusters_orders_are_withdrawn_before_the_job_moves(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        await fakes.wait_for("post_submit_order")
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "lost", "gone"))
        again = (await fakes.wait_for("enqueue_job", 2))[1]
        withdrawn = fakes.of("withdraw_submit_orders")
        assert [(w.cluster, w.job_uid) for w in withdrawn] == [(a, inp.uid)]
        await h.signal(SIG_PLACED, Placement(again.seq, {b: 2}))
        await fakes.wait_for("post_submit_order", 2)
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "recovered"))
        await fakes.wait_for("delete_replicas")
        for rank in (0, 1):
            await report(h, inp, b, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
        await replays(h, "job_orders_failover")
    assert sequence(fakes) == [f"order {a}", f"withdraw_submit_orders {a}", f"order {b}",
                               f"delete_replicas {a}"]


async def test_deletion_withdraws_every_order_before_deleting(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1, b: 1})
        await fakes.wait_for("post_submit_order", 2)
        await h.signal(SIG_ENSURE, JobInput(**{**inp.__dict__, "deleting": True}))
        assert await h.result() == "Deleted"
        await replays(h, "job_orders_deleted")
    seq = sequence(fakes)
    assert sorted(seq[:2]) == sorted([f"order {a}", f"order {b}"])
    assert sorted(seq[2:4]) == sorted([f"withdraw_submit_orders {a}",
                                       f"withdraw_submit_orders {b}"])
    assert sorted(seq[4:]) == sorted([f"delete_replicas {a}", f"delete_replicas {b}"])


async def test_scaling_down_withdraws_and_orders_the_rest_again(
    workflow_env: WorkflowEnvironment,
) -> None:
    """An order may hold a rank that a scale-down deletes: it is withdrawn before the delete,
    and the ranks it held that stay are ordered again (a no-op where it was carried out)."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=3, policy="Always")
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 3})
        await fakes.wait_for("post_submit_order")
        await report(h, inp, a, 0, 0, "Running")  # rank 0 started; 1 and 2 not yet
        assert inp.template is not None
        smaller = JobTemplate(**{**inp.template.__dict__, "replicas": 2})
        fakes.read_result = ReadJobResult(True, 2, smaller)
        await h.signal(SIG_SPEC, SpecChanged(2))
        again = (await fakes.wait_for("post_submit_order", 2))[1]
        assert [r.rank for r in again.submit.replicas] == [1]  # 0 runs, 2 is gone
        assert fakes.of("delete_replicas")[0].names[0].endswith("-2")
    assert sequence(fakes) == [f"order {a}", f"withdraw_submit_orders {a}",
                               f"delete_replicas {a}", f"order {a}"]


async def test_a_refusal_fails_the_job_but_not_one_from_a_cluster_it_left(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await fakes.wait_for("post_submit_order")
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "lost", "gone"))
        again = (await fakes.wait_for("enqueue_job", 2))[1]
        await h.signal(SIG_PLACED, Placement(again.seq, {b: 1}))
        await fakes.wait_for("post_submit_order", 2)
        # a late refusal of the order on a (withdrawn since): the job runs on b
        await h.signal(SIG_CLUSTER, ClusterEvent(a, REJECTED, "no such image"))
        await report(h, inp, b, 0, 0, "Running")
        for _ in range(200):  # the report is taken after the refusal, in order
            if (await h.query(JobWorkflow.state)).phase == "Running":
                break
            await asyncio.sleep(0.05)
        assert (await h.query(JobWorkflow.state)).phase == "Running"
        await h.signal(SIG_CLUSTER, ClusterEvent(b, REJECTED, "no such image"))
        assert await h.result() == "Failed"
    final = fakes.of("write_job_status")[-1]
    assert final.message == f"cannot run on cluster {b}: no such image"


async def test_it_waits_for_its_placement_without_a_timer_and_asks_again_when_told(
    workflow_env: WorkflowEnvironment,
) -> None:
    """No requeue_after timer (2 events per job): the control worker's sweep tells a job whose
    request the scheduler lost (workers/requeue.py); it asks again, and takes only the answer
    to the new request."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        first = (await fakes.wait_for("enqueue_job"))[0]
        await workflow_env.sleep(3600.0)  # far past requeue_after: nothing happens by itself
        assert len(fakes.of("enqueue_job")) == 1
        await h.signal(SIG_REQUEUE, Requeue("not queued"))
        again = (await fakes.wait_for("enqueue_job", 2))[1]
        assert again.seq == first.seq + 1
        await h.signal(SIG_PLACED, Placement(first.seq, {a: 1}))  # the lost request's answer
        await h.signal(SIG_PLACED, Placement(again.seq, {a: 1}))
        await fakes.wait_for("post_submit_order")
        await report(h, inp, a, 0, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
        types = [e.event_type async for e in h.fetch_history_events()]
        await replays(h, "job_orders_requeued")
    assert EventType.EVENT_TYPE_TIMER_STARTED not in types
    assert len(fakes.of("post_submit_order")) == 1


async def test_an_order_the_control_worker_refuses_fails_the_job(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The order's checks (activities.trust) refuse it: the job fails with the reason, as it
    did when the submit activity refused its input, instead of the workflow failing."""
    fakes, a = Fakes(order_error="post_submit_order: refused a forged or invalid input: x"), \
        unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        h = await start(workflow_env.client, q, job())
        await place(h, fakes, 1, {a: 1})
        res = await h.result()
        assert res == "Failed"
    final = fakes.of("write_job_status")[-1]
    assert final.message == f"cannot run on cluster {a}: {fakes.order_error}"
