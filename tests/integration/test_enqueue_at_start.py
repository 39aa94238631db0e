"""A new job's first placement request goes beside its start (contract/enqueue.py), on the dev
server with the real starter, scheduler, control worker and skylet.

The starter starts the job's workflow with a start delay and sends the scheduler its request;
the scheduler's answer, a signal-with-start, ends the delay. What a user of the Temporal UI sees
in the job's history: the placement arrives before the first workflow task, which writes the
submit order; the job asks the scheduler for nothing itself. And a deletion (a signal-with-start
too) does not wait for the delay.
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistoryEventFilterType

from skyshift.contract.enqueue import START_DELAY, first_enqueue
from skyshift.contract.jobs import JobInput, JobTemplate, Placement
from skyshift.contract.names import SIG_PLACED, job_workflow_id
from skyshift.lifecycle.enqueue import tell_placed
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
TASK_SCHEDULED = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED


async def history(s: LifecycleStack, name: str, ended: bool = False) -> list[HistoryEvent]:
    """The job workflow's events; with ``ended``, once the workflow has closed (the store
    shows the final phase when its local activity wrote it, before the workflow task that
    records it as a marker has completed)."""
    handle = s.client.get_workflow_handle(job_workflow_id("default", name))
    if ended:
        await asyncio.wait_for(handle.result(), 60)
    return [e async for e in handle.fetch_history_events()]


async def test_the_placement_is_in_the_first_workflow_task(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("ea-a", cpus=2)
    await s.cluster_phase("ea-a", "Ready")
    await s.submit("ea-job", "true")
    job = await s.job_phase("ea-job", "Succeeded", timeout=90)
    assert job["status"]["placement"] == {"ea-a": 1}
    events = await history(s, "ea-job", ended=True)
    types = [e.event_type for e in events]
    started = events[0].workflow_execution_started_event_attributes
    assert started.first_workflow_task_backoff.ToTimedelta() == START_DELAY
    assert started.input.payloads  # the starter's input, with `enqueued` set
    first_task = types.index(TASK_SCHEDULED)
    signals = [e.workflow_execution_signaled_event_attributes.signal_name
               for e in events[:first_task] if e.event_type == SIGNALED]
    assert signals == [SIG_PLACED], types
    # the order, and nothing else: no enqueue of its own, no activity, no timer, and no write
    # of the final status, which the skylet wrote when it counted the replica Succeeded
    assert types.count(EventType.EVENT_TYPE_MARKER_RECORDED) == 1, types
    assert job["status"]["message"] == "all 1 replicas succeeded"
    assert job["status"]["completionTime"]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
    assert EventType.EVENT_TYPE_TIMER_STARTED not in types
    assert types.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) <= 3, types


async def test_a_job_deleted_while_it_waits_does_not_wait_for_the_delay(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("ea-small", cpus=1)
    await s.cluster_phase("ea-small", "Ready")
    await s.submit("ea-big", "true", cpus=4)  # fits nowhere: the scheduler holds it

    async def pending_reason() -> bool:
        job = await s.get("jobs", "ea-big")
        return bool(job and job["status"].get("schedulerReasons"))

    await s.wait("the scheduler's answer: pending, with reasons", pending_reason)
    await s.delete("jobs", "ea-big", "default")
    await s.wait("the job removed", lambda: _gone(s, "ea-big"), timeout=90)
    handle = s.client.get_workflow_handle(job_workflow_id("default", "ea-big"))
    assert await handle.result() == "Deleted"
    events = [e async for e in handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.ALL_EVENT)]
    types = [e.event_type for e in events]
    first_task = types.index(TASK_SCHEDULED)
    # the deletion's signal-with-start dispatched the first task, before the delay ran out
    # (a task the delay's end dispatched would come before that signal)
    assert SIGNALED in types[:first_task], types
    elapsed = events[first_task].event_time.ToDatetime() - events[0].event_time.ToDatetime()
    assert elapsed < START_DELAY


async def _gone(s: LifecycleStack, name: str) -> bool:
    return await s.get("jobs", name) is None


async def test_an_answer_for_a_job_without_a_workflow_starts_nothing_that_stays(
    lifecycle_stack: LifecycleStack,
) -> None:
    """The scheduler's signal-with-start where no job workflow is kept makes one of the orphan
    input, which ends at once, and reports the job gone; where a finished one is kept, the
    start is refused: gone too."""
    s = lifecycle_stack
    s.start_in_process(skylets=False)
    inp = JobInput("default", "ea-none", "u-1", template=JobTemplate(run="true"))
    first = first_enqueue(inp, 1.0)
    assert first is not None
    placement = Placement(1, {"nowhere": 1})
    assert not await tell_placed(s.client, first.workflow_id, first.request, placement)
    handle = s.client.get_workflow_handle(first.workflow_id)
    assert await handle.result() == "Failed"
    assert not await tell_placed(s.client, first.workflow_id, first.request, placement)
