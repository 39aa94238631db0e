"""Between the scheduler and a job's workflow: the request a starter sends beside a new job's
start (:mod:`skyshift.contract.enqueue`) or the ``enqueue_job`` activity for a job that asks
again, and the scheduler's answer."""

from __future__ import annotations

import logging
from dataclasses import replace

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from skyshift.contract.enqueue import first_enqueue, orphan_input
from skyshift.contract.jobs import EnqueueRequest, JobInput, Placement, SchedulerInput
from skyshift.contract.names import (
    CONTROL_QUEUE,
    SCHEDULER_ID,
    SIG_ENQUEUE,
    SIG_PLACED,
    WF_JOB,
    WF_SCHEDULER,
)
from skyshift.scheduler.types import JobRequest

log = logging.getLogger(__name__)


async def enqueue(client: Client, req: EnqueueRequest) -> None:
    """Signal-with-start the scheduler: it exists after this, with the job queued."""
    await client.start_workflow(
        WF_SCHEDULER, SchedulerInput(), id=SCHEDULER_ID, task_queue=CONTROL_QUEUE,
        start_signal=SIG_ENQUEUE, start_signal_args=[req],
    )


def plan_start(inp: JobInput, now: float) -> tuple[JobInput, EnqueueRequest | None]:
    """The input a new job workflow starts with and the request to send beside its start (None:
    the workflow asks for nothing first, or enqueues itself)."""
    first = first_enqueue(inp, now)
    return (inp, None) if first is None else (replace(inp, enqueued=True), first)


async def send_first(client: Client, req: EnqueueRequest) -> None:
    """Send a started job's first request. A failure is logged, not raised: the workflow is
    started, and the control worker's requeue sweep finds a job the scheduler does not hold
    (two of its passes), whose signal the workflow takes when its start delay is over."""
    try:
        await enqueue(client, req)
    except Exception as exc:
        log.warning("first placement request of %s not sent (the requeue sweep will): %s",
                    req.request.key, exc)


async def tell_placed(client: Client, workflow_id: str, req: JobRequest,
                      placement: Placement) -> bool:
    """Deliver a placement to the job's workflow; False when it has none to take it.

    A signal-with-start: it ends a new job's start delay, where a plain signal would wait for
    the delay to pass. A finished workflow refuses the start (REJECT_DUPLICATE). Where none is
    kept at all, the start makes one of :func:`orphan_input`, which ends at once: the answer is
    False then too (the job's own workflow, when the reconciler starts one, asks again)."""
    namespace, name = req.key.split("/", 1)
    try:
        handle = await client.start_workflow(
            WF_JOB, orphan_input(namespace, name, req.uid), id=workflow_id,
            task_queue=CONTROL_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            start_signal=SIG_PLACED, start_signal_args=[placement],
        )
    except WorkflowAlreadyStartedError:
        return False
    # the SDK keeps the server's answer, whose `started` says whether this call started it
    response = getattr(handle, "_start_workflow_response", None)
    return not getattr(response, "started", False)
