"""Between the scheduler and a job's workflow: the request a starter sends beside a new job's
start (:mod:`skyshift.contract.enqueue`) or the ``enqueue_job`` activity for a job that asks
again, and the scheduler's answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from dataclasses import replace

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from skyshift.contract.enqueue import first_enqueue, orphan_input
from skyshift.contract.jobs import (
    EnqueueBatch,
    EnqueueRequest,
    JobInput,
    Placement,
    SchedulerInput,
)
from skyshift.contract.names import (
    CONTROL_QUEUE,
    SCHEDULER_ID,
    SIG_ENQUEUE,
    SIG_ENQUEUE_MANY,
    SIG_PLACED,
    WF_JOB,
    WF_SCHEDULER,
)
from skyshift.scheduler.types import JobRequest

log = logging.getLogger(__name__)


#: The most requests one signal carries (an EnqueueRequest is about half a kilobyte, a signal
#: may be 2 MB): the rest go in the next one.
MAX_BATCH = 100


async def enqueue(client: Client, req: EnqueueRequest) -> None:
    """Signal-with-start the scheduler: it exists after this, with the job queued. Requests
    made while another is on its way go together in the next signal (:class:`Batcher`)."""
    await Batcher.of(client).send(req)


async def _signal(client: Client, reqs: list[EnqueueRequest]) -> None:
    """One signal-with-start: ``enqueue`` for one request (as a job's own enqueue sends it),
    ``enqueue_many`` for more."""
    signal, arg = (SIG_ENQUEUE, reqs[0]) if len(reqs) == 1 else (
        SIG_ENQUEUE_MANY, EnqueueBatch(reqs))
    await client.start_workflow(
        WF_SCHEDULER, SchedulerInput(), id=SCHEDULER_ID, task_queue=CONTROL_QUEUE,
        start_signal=signal, start_signal_args=[arg],
    )


class Batcher:
    """The scheduler's placement requests from one process, sent as they come with no wait
    added: one goes at once, and those made while it is on its way go together when it is
    back. Under a burst of submissions the scheduler's history gets one signal event for many
    jobs (each was one event of its 2.3 per job, bench/temporal_cost.py), and Temporal one call.
    A caller of :meth:`send` returns once the signal carrying its request was accepted, or
    raises its error; :meth:`post` returns at once and a failure is logged."""

    _of: weakref.WeakKeyDictionary[Client, Batcher] = weakref.WeakKeyDictionary()

    def __init__(self, client: Client) -> None:
        self.client = client
        self.loop = asyncio.get_running_loop()
        # each request with its caller's future (None: posted, nobody waits)
        self.waiting: list[tuple[EnqueueRequest, asyncio.Future[None] | None]] = []
        self.task: asyncio.Task[None] | None = None  # sending, while there is anything to send

    @classmethod
    def of(cls, client: Client) -> Batcher:
        """The client's batcher (one per event loop: a test's loop ends with its tasks)."""
        batcher = cls._of.get(client)
        if batcher is None or batcher.loop is not asyncio.get_running_loop():
            batcher = cls._of[client] = cls(client)
        return batcher

    async def send(self, req: EnqueueRequest) -> None:
        done: asyncio.Future[None] = self.loop.create_future()
        self._add(req, done)
        await done

    def post(self, req: EnqueueRequest) -> None:
        """Queue ``req`` for the next signal and return: nobody waits for it."""
        self._add(req, None)

    def _add(self, req: EnqueueRequest, done: asyncio.Future[None] | None) -> None:
        self.waiting.append((req, done))
        if self.task is None:
            self.task = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        batch: list[tuple[EnqueueRequest, asyncio.Future[None] | None]] = []
        try:
            while self.waiting:
                batch, self.waiting = self.waiting[:MAX_BATCH], self.waiting[MAX_BATCH:]
                try:
                    await _signal(self.client, [req for req, _ in batch])
                except Exception as exc:  # each caller of this batch gets the error
                    _settle(batch, exc)
                else:
                    _settle(batch, None)
        except BaseException:  # cancelled (the loop ends): so is every caller still waiting
            dropped = [req.request.key for req, done in batch + self.waiting if done is None]
            for _, done in batch + self.waiting:
                if done is not None:
                    done.cancel()
            self.waiting = []
            if dropped:
                log.warning("placement requests of %s not sent as this process stops (the "
                            "requeue sweep will)", ", ".join(dropped))
            raise
        finally:
            self.task = None


def _settle(batch: list[tuple[EnqueueRequest, asyncio.Future[None] | None]],
            error: Exception | None) -> None:
    for req, done in batch:
        if done is None:  # posted: nobody to tell but the log
            if error is not None:
                log.warning("placement request of %s not sent (the requeue sweep will): %s",
                            req.request.key, error)
            continue
        if done.done():  # its caller was cancelled: the request went anyway
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


def plan_start(inp: JobInput, now: float) -> tuple[JobInput, EnqueueRequest | None]:
    """The input a new job workflow starts with and the request to send beside its start (None:
    the workflow asks for nothing first, or enqueues itself)."""
    first = first_enqueue(inp, now)
    return (inp, None) if first is None else (replace(inp, enqueued=True), first)


def send_first(client: Client, req: EnqueueRequest) -> None:
    """Queue a started job's first request for the scheduler and return: the caller (the API's
    POST) does not wait for the signal. Its failure is logged, not raised: the workflow is
    started, and the control worker's requeue sweep finds a job the scheduler does not hold
    (two of its passes), whose signal the workflow takes when its start delay is over; so it
    does when this process ends before the signal went."""
    Batcher.of(client).post(req)


async def flush(client: Client, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for the requests this process posted on ``client`` to go
    (a server that stops; what is left the requeue sweep sends)."""
    batcher = Batcher._of.get(client)
    if batcher is None or batcher.task is None or batcher.loop is not asyncio.get_running_loop():
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(batcher.task), timeout)


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
