"""Same-name fakes of SkyShift's own activities, for workflow tests on the time-skipping server.

They sit above the adapter boundary (the workflows cannot tell them from the real activities)
and record every call, so a test asserts on what a workflow decided and in which order. The
fake placement uses the real pure scheduler and the real reservation arithmetic, so scheduler
tests exercise the queue and reservation rules of the workflow for real.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from skyshift.activities.scheduling import cluster_infos
from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    ClusterEvent,
    ClusterJobsInput,
    ClusterStatusPatch,
    DeleteReplicasInput,
    DeleteReplicasResult,
    DequeueRequest,
    EnqueueRequest,
    JobStatusPatch,
    PlaceBatchInput,
    PlaceBatchResult,
    PlaceOutcome,
    ReadJobInput,
    ReadJobResult,
    RemoveObjectInput,
    ReplicaUpdate,
    SubmitInput,
    SubmitOrder,
    SubmitResult,
    SyncInput,
    SyncResult,
    TeardownInput,
    TeardownResult,
    WithdrawOrders,
)
from skyshift.contract.names import CONTROL_QUEUE, SIG_CLUSTER, job_workflow_id, skylet_queue
from skyshift.models.quantity import Resources
from skyshift.scheduler import schedule_batch
from skyshift.workflows.cluster import ClusterWorkflow
from skyshift.workflows.job import JobWorkflow
from skyshift.workflows.scheduler import SchedulerWorkflow


@dataclass
class Fakes:
    calls: list[tuple[str, Any]] = field(default_factory=list)
    submit_state: str = "Running"
    submit_error: str = ""  # non-retryable error type to raise from submit
    order_error: str = ""  # the message of a refusal of a submit order by the control worker
    read_result: ReadJobResult | None = None
    # scheduler: cluster -> allocatable cpus (one node each), as etcd would show it
    allocatable: dict[str, float] = field(default_factory=dict)
    sync_results: list[SyncResult] = field(default_factory=list)

    def of(self, name: str) -> list[Any]:
        return [p for n, p in self.calls if n == name]

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]

    async def wait_for(self, name: str, count: int = 1, timeout: float = 10.0) -> list[Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.of(name)) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"{name} called {len(self.of(name))} times, want {count}: {self.names()}"
                )
            await asyncio.sleep(0.02)
        return self.of(name)

    # ---- control queue ---------------------------------------------------------------------

    @activity.defn(name=act.ENQUEUE_JOB)
    async def enqueue_job(self, req: EnqueueRequest) -> None:
        self.calls.append(("enqueue_job", req))

    @activity.defn(name=act.DEQUEUE_JOB)
    async def dequeue_job(self, req: DequeueRequest) -> None:
        self.calls.append(("dequeue_job", req))

    @activity.defn(name=act.WRITE_JOB_STATUS)
    async def write_job_status(self, patch: JobStatusPatch) -> bool:
        self.calls.append(("write_job_status", patch))
        return True

    @activity.defn(name=act.READ_JOB)
    async def read_job(self, inp: ReadJobInput) -> ReadJobResult:
        self.calls.append(("read_job", inp))
        assert self.read_result is not None
        return self.read_result

    @activity.defn(name=act.REMOVE_OBJECT)
    async def remove_object(self, inp: RemoveObjectInput) -> bool:
        self.calls.append(("remove_object", inp))
        return True

    @activity.defn(name=act.WRITE_CLUSTER_STATUS)
    async def write_cluster_status(self, patch: ClusterStatusPatch) -> bool:
        self.calls.append(("write_cluster_status", patch))
        return True

    @activity.defn(name=act.NOTIFY_CLUSTER_JOBS)
    async def notify_cluster_jobs(self, inp: ClusterJobsInput) -> int:
        self.calls.append(("notify_cluster_jobs", inp))
        return 0

    @activity.defn(name=act.PLACE_BATCH)
    async def place_batch(self, inp: PlaceBatchInput) -> PlaceBatchResult:
        self.calls.append(("place_batch", inp))
        objs = [
            {
                "metadata": {"name": c},
                "status": {
                    "phase": "Ready",
                    "allocatable": {f"{c}-0": {"cpus": cpus, "memory": 1e6}},
                },
            }
            for c, cpus in sorted(self.allocatable.items())
        ]
        now = time.time()  # a preemptor waiting for its victims, as the real round sees it
        requests = [replace(e.req.request, nominated=e.nominated_until > now,
                            waits_on=list(e.waits_on)) for e in inp.jobs]
        decisions = schedule_batch(requests, cluster_infos(objs, inp.reservations), [])
        return PlaceBatchResult(
            [
                PlaceOutcome(
                    e.req.request.key,
                    e.req.request.uid,
                    e.req.seq,
                    "placed" if d.placed else "pending",
                    dict(d.assignments),
                    d.message,
                )
                for e, d in zip(inp.jobs, decisions, strict=True)
            ]
        )

    @activity.defn(name=act.POST_SUBMIT_ORDER)
    async def post_submit_order(self, order: SubmitOrder) -> None:
        """Written to etcd; with ``submit_error`` the skylet refuses it (a ``rejected`` event)."""
        self.calls.append(("post_submit_order", order))
        if self.order_error:
            raise ApplicationError(self.order_error, type="InvalidInput", non_retryable=True)
        if self.submit_error:
            job = order.submit.job
            event = ClusterEvent(order.submit.cluster, "rejected", "it can never run")
            handle = activity.client().get_workflow_handle(job_workflow_id(job.namespace,
                                                                           job.name))
            await handle.signal(SIG_CLUSTER, event)

    @activity.defn(name=act.WITHDRAW_SUBMIT_ORDERS)
    async def withdraw_submit_orders(self, inp: WithdrawOrders) -> int:
        self.calls.append(("withdraw_submit_orders", inp))
        return 0

    # ---- skylet queues ---------------------------------------------------------------------

    @activity.defn(name=act.SUBMIT_REPLICAS)
    async def submit_replicas(self, inp: SubmitInput) -> SubmitResult:
        self.calls.append(("submit_replicas", inp))
        if self.submit_error:
            raise ApplicationError("it can never run", type=self.submit_error, non_retryable=True)
        return SubmitResult(
            [ReplicaUpdate(s.name, s.rank, s.attempt, self.submit_state) for s in inp.replicas]
        )

    @activity.defn(name=act.DELETE_REPLICAS)
    async def delete_replicas(self, inp: DeleteReplicasInput) -> DeleteReplicasResult:
        self.calls.append(("delete_replicas", inp))
        return DeleteReplicasResult(list(inp.names))

    @activity.defn(name=act.SYNC_CLUSTER)
    async def sync_cluster(self, inp: SyncInput) -> SyncResult:
        self.calls.append(("sync_cluster", inp))
        if self.sync_results:
            return self.sync_results.pop(0)
        while True:  # a healthy cluster: runs until cancelled
            activity.heartbeat()
            await asyncio.sleep(0.05)

    @activity.defn(name=act.TEARDOWN_CLUSTER)
    async def teardown_cluster(self, inp: TeardownInput) -> TeardownResult:
        self.calls.append(("teardown_cluster", inp))
        return TeardownResult(["job/ns/x"], 2, "deleted 2 replicas")

    def control(self) -> list[Callable[..., Any]]:
        return [
            self.enqueue_job,
            self.dequeue_job,
            self.write_job_status,
            self.read_job,
            self.remove_object,
            self.write_cluster_status,
            self.notify_cluster_jobs,
            self.place_batch,
            self.post_submit_order,
            self.withdraw_submit_orders,
        ]

    def skylet(self) -> list[Callable[..., Any]]:
        return [
            self.submit_replicas,
            self.delete_replicas,
            self.sync_cluster,
            self.teardown_cluster,
        ]


STARTED: list[Any] = []  # handles of workflows started by tests (terminated after each test)
#: the fakes of each running control worker, by its task queue (a test's starter records the
#: first placement request it sends beside a job's start as the worker's enqueue_job call)
BY_QUEUE: dict[str, Fakes] = {}


async def start(client: Client, run: Any, arg: Any, wf_id: str, queue: str) -> Any:
    """Start ``run`` (a workflow's run method) with ``arg``; terminated when the test ends."""
    h = await client.start_workflow(run, arg, id=wf_id, task_queue=queue)
    STARTED.append(h)
    return h


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


@asynccontextmanager
async def run_workers(
    client: Client,
    workflows: list[type],
    control: list[Callable[..., Any]],
    skylet: list[Callable[..., Any]],
    clusters: list[str],
) -> AsyncIterator[str]:
    """A control worker on a unique task queue (its name is yielded) running ``workflows`` and
    the ``control`` fakes, plus a worker per cluster on its skylet queue with the ``skylet``
    fakes."""
    queue = unique(f"{CONTROL_QUEUE}-")
    ws = [Worker(client, task_queue=queue, workflows=workflows, activities=control)]
    ws += [Worker(client, task_queue=skylet_queue(c), activities=skylet) for c in clusters]
    async with AsyncExitStack() as stack:
        for w in ws:
            await stack.enter_async_context(w)
        yield queue


@asynccontextmanager
async def workers(client: Client, fakes: Fakes, clusters: list[str]) -> AsyncIterator[str]:
    """Control worker (unique task queue) plus a skylet worker per cluster, all on fakes."""
    async with run_workers(
        client,
        [JobWorkflow, SchedulerWorkflow, ClusterWorkflow],
        fakes.control(),
        fakes.skylet(),
        clusters,
    ) as queue:
        BY_QUEUE[queue] = fakes
        try:
            yield queue
        finally:
            BY_QUEUE.pop(queue, None)


def cpus(n: float) -> Resources:
    return Resources(cpus=n, memory=0.0)
