"""A job's first placement request, sent beside its workflow's start (``JobInput.enqueued``).

A new job's workflow does not enqueue itself. Whoever starts it (the API's starter, the
reconciler) sends the scheduler the request :func:`first_enqueue` builds right after the start,
and starts the workflow with :data:`START_DELAY` and ``enqueued`` set in its input. The
scheduler answers with the ``placed`` signal as a signal-with-start (:func:`orphan_input` is the
input it would start a workflow with, which ends at once). Temporal ends a start delay at a
signal-with-start but not at a plain signal. So the job's first workflow task sees its start and
its placement together: one workflow task and the enqueue's marker fewer per job, 4 of its 17
history events.

When the scheduler takes longer than the delay, the first task runs at its end and the job waits
as before. A request that never reached the scheduler (the starter failed in between) is found
by the control worker's requeue sweep (``workers/requeue.py``), as for any job the scheduler
does not hold.
"""

from __future__ import annotations

from datetime import timedelta

from skyshift.contract.jobs import EnqueueRequest, JobInput, JobTemplate
from skyshift.contract.names import job_workflow_id
from skyshift.models.job import TERMINAL_PHASES
from skyshift.scheduler.types import JobRequest

#: How long a new job's first workflow task waits for its placement. The placement ends the wait
#: whenever it comes; so this only bounds how late a job the scheduler cannot place yet (or never
#: got: then the requeue sweep's signal waits for it too) runs its first task.
START_DELAY = timedelta(seconds=30)


def job_request(inp: JobInput, t: JobTemplate, replicas: int, now: float) -> JobRequest:
    """What the scheduler is asked to place: ``replicas`` more of the job's replicas."""
    return JobRequest(
        key=f"{inp.namespace}/{inp.name}", uid=inp.uid, namespace=inp.namespace,
        labels=dict(t.labels), priority=t.priority, created=inp.created or now,
        replicas=replicas, per_replica=t.resources, filters=list(t.filters),
        preferences=list(t.preferences), preemption=t.preemption_policy,
    )


def wants_first_placement(inp: JobInput) -> bool:
    """True when a workflow started with ``inp`` asks for a placement first thing."""
    return (
        inp.state is None and not inp.deleting and not inp.invalid
        and inp.phase not in TERMINAL_PHASES
        and inp.template is not None and inp.template.replicas > 0
    )


def enqueued_at_start(inp: JobInput) -> bool:
    """True when the starter sent this run's first request (so its workflow does not)."""
    return inp.enqueued and wants_first_placement(inp)


def first_enqueue(inp: JobInput, now: float) -> EnqueueRequest | None:
    """The request a starter sends beside the start (sequence number 1), or None when a
    workflow started with ``inp`` asks for no placement."""
    if not wants_first_placement(inp) or inp.template is None:
        return None
    req = job_request(inp, inp.template, inp.template.replicas, now)
    return EnqueueRequest(job_workflow_id(inp.namespace, inp.name), 1, req, {})


def orphan_input(namespace: str, name: str, uid: str) -> JobInput:
    """The input of a job workflow that the scheduler's signal-with-start would start where none
    ran and none is kept (a finished one refuses it): it ends at once and touches nothing."""
    return JobInput(namespace=namespace, name=name, uid=uid, phase="Failed")
