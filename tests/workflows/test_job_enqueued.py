"""A job whose first placement request the starter sent beside its start (``JobInput.enqueued``,
contract/enqueue.py): what only that start changes, on the time-skipping test server.

(A deletion before the placement dequeues request 1: test_job_workflow.py's tests run in this
mode too. The integration test test_enqueue_at_start.py runs the API's starter and the real
scheduler on the dev server.)
"""

from __future__ import annotations

import time
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.enqueue import START_DELAY, first_enqueue, orphan_input
from skyshift.contract.jobs import (
    REVISION,
    JobConfig,
    JobInput,
    JobTemplate,
    Placement,
    Requeue,
)
from skyshift.contract.names import SIG_PLACED, SIG_REQUEUE, job_workflow_id
from skyshift.lifecycle.enqueue import plan_start, tell_placed
from skyshift.workflows.job import JobWorkflow
from tests.workflows.fakes import STARTED, Fakes, cpus, unique, workers
from tests.workflows.record import replays
from tests.workflows.test_job_workflow import report

pytestmark = pytest.mark.asyncio


def job(replicas: int = 1) -> JobInput:
    return JobInput(
        namespace="ns", name=unique("j"), uid=str(uuid.uuid4()), generation=1, created=1.0,
        template=JobTemplate(run="true", resources=cpus(1), replicas=replicas),
        config=JobConfig(backoff_base=1.0, backoff_max=8.0), revision=REVISION,
    )


async def started(client: Client, queue: str, inp: JobInput) -> WorkflowHandle[JobWorkflow, str]:
    """Started as the API's starter starts it: with ``enqueued`` set (its request sent) and the
    start delay."""
    inp, first = plan_start(inp, time.time())
    assert first is not None and inp.enqueued and first.seq == 1
    h = await client.start_workflow(JobWorkflow.run, inp, id=job_workflow_id("ns", inp.name),
                                    task_queue=queue, start_delay=START_DELAY)
    STARTED.append(h)
    return h


@pytest.mark.parametrize("skylet_wrote", [False, True], ids=["workflow-writes", "skylet-wrote"])
async def test_the_first_task_takes_start_and_placement_and_writes_the_order(
    workflow_env: WorkflowEnvironment, skylet_wrote: bool,
) -> None:
    """No enqueue of its own (the starter's request 1 is answered) and no task for the
    placement alone: the history is 13 events, the minimal 3-activity workflow's is 23. And 12
    when the skylet's report says it wrote the job Succeeded (``ReplicaReport.finished``): no
    final status write."""
    fakes, a = Fakes(), unique("a")
    inp = job()
    async with workers(workflow_env.client, fakes, [a]) as q:
        h = await started(workflow_env.client, q, inp)
        request = first_enqueue(inp, time.time())
        assert request is not None  # the scheduler answers it as its batch activity does
        assert await tell_placed(workflow_env.client, h.id, request.request,
                                 Placement(1, {a: 1}))
        order = (await fakes.wait_for("post_submit_order"))[0]
        assert order.submit.cluster == a
        await report(h, inp, a, 0, 0, "Succeeded", 0, finished=skylet_wrote)
        assert await h.result() == "Succeeded"
        events = [e async for e in h.fetch_history_events()]
        await replays(h, "job_skylet_succeeded" if skylet_wrote else "job_enqueued_succeeded")
    assert not fakes.of("enqueue_job")  # the workflow asked for nothing itself
    assert len([p for p in fakes.of("write_job_status") if p.finished]) == (not skylet_wrote)
    types = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
    assert EventType.EVENT_TYPE_TIMER_STARTED not in types
    markers = types.count(EventType.EVENT_TYPE_MARKER_RECORDED)
    # the order, and the final status unless the skylet wrote it; no enqueue
    assert markers == (1 if skylet_wrote else 2), types
    tasks = types.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    assert tasks <= 2 and len(types) <= (12 if skylet_wrote else 13), types


async def test_a_lost_first_request_is_asked_again_when_the_sweep_tells(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The starter's request never reached the scheduler: the job waits (no timer) until the
    requeue sweep's signal, then asks with request 2 and takes only its answer."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        h = await started(workflow_env.client, q, inp)
        await workflow_env.sleep(3600.0)
        assert not fakes.of("enqueue_job")
        await h.signal(SIG_REQUEUE, Requeue("not queued"))
        again = (await fakes.wait_for("enqueue_job"))[0]
        assert again.seq == 2 and again.request.replicas == 1
        await h.signal(SIG_PLACED, Placement(2, {a: 1}))
        await fakes.wait_for("post_submit_order")
        await report(h, inp, a, 0, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"


async def test_what_the_starter_sends_for_which_input() -> None:
    """Only a start that asks for a placement first gets ``enqueued`` and a request."""
    inp = job(replicas=3)
    first = first_enqueue(inp, 5.0)
    assert first is not None
    assert first.workflow_id == job_workflow_id("ns", inp.name) and first.current == {}
    assert first.request.replicas == 3 and first.request.created == 1.0
    for other in (JobInput("ns", "x", "u", phase="Succeeded", template=inp.template),
                  JobInput("ns", "x", "u", deleting=True, template=inp.template),
                  JobInput("ns", "x", "u", invalid="bad image", template=inp.template),
                  JobInput("ns", "x", "u", template=JobTemplate(replicas=0))):
        assert first_enqueue(other, 5.0) is None
        assert plan_start(other, 5.0) == (other, None)


async def test_the_scheduler_starts_no_job_where_none_is_kept(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The input of the scheduler's signal-with-start (for a job whose workflow is not kept):
    the workflow ends at once and calls nothing."""
    fakes = Fakes()
    async with workers(workflow_env.client, fakes, []) as q:
        h = await workflow_env.client.start_workflow(
            JobWorkflow.run, orphan_input("ns", "gone", "u"), id=job_workflow_id("ns", "gone"),
            task_queue=q, start_signal=SIG_PLACED, start_signal_args=[Placement(1, {"a": 1})])
        STARTED.append(h)
        assert await h.result() == "Failed"
    assert fakes.calls == []
