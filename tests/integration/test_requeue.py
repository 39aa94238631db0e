"""A scheduler that loses its queue (its workflow terminated) does not strand the jobs that
waited in it: the control worker's requeue sweep (workers/requeue.py) has them ask again.

Jobs of lifecycle revision SUBMIT_ORDERS wait for their placement without a timer, so without
the sweep such a job would wait for good: a new cluster's capacity signal finds no scheduler.
"""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from skyshift.contract.names import SCHEDULER_ID, SIG_REQUEUE, job_workflow_id
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def test_a_job_queued_in_a_terminated_scheduler_is_placed(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("rq-small", cpus=1)
    await s.cluster_phase("rq-small", "Ready")
    await s.submit("rq-big", "true", cpus=2)  # fits nowhere yet: queued at the scheduler

    async def pending_reason() -> bool:
        job = await s.get("jobs", "rq-big")
        return bool(job and job["status"].get("schedulerReasons"))

    await s.wait("the scheduler's answer: pending, with reasons", pending_reason)
    await s.client.get_workflow_handle(SCHEDULER_ID).terminate("the test loses the queue")
    await s.add_cluster("rq-large", cpus=4)
    job = await s.job_phase("rq-big", "Succeeded", timeout=90)
    assert job["status"]["placement"] == {"rq-large": 1}
    handle = s.client.get_workflow_handle(job_workflow_id("default", "rq-big"))
    events = [e async for e in handle.fetch_history_events()]
    signals = [e.workflow_execution_signaled_event_attributes.signal_name for e in events
               if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
    assert SIG_REQUEUE in signals
    assert not [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
