"""The requeue sweep's rules (workers/requeue.py), with Temporal's answers from memory; the
real scheduler, jobs and reconciler run in tests/integration/test_requeue.py."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from skyshift.contract.jobs import QueueView
from skyshift.contract.names import SIG_CLUSTER, SIG_REQUEUE
from skyshift.workers.requeue import RequeueSweep, stranded, waiting


def job(name: str, phase: str = "Pending", placement: dict[str, int] | None = None,
        replicas: int = 1, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    return {"metadata": meta, "spec": {"replicas": replicas},
            "status": {"phase": phase, "placement": placement or {}}}


class Desc:
    def __init__(self, status: WorkflowExecutionStatus) -> None:
        self.status = status


class Handle:
    def __init__(self, client: Client, wf_id: str) -> None:
        self.client, self.wf_id = client, wf_id

    async def describe(self) -> Desc:
        if self.client.view is None:
            raise RPCError("not found", RPCStatusCode.NOT_FOUND, b"")
        return Desc(self.client.status)

    async def query(self, name: str, result_type: Any) -> QueueView:
        assert self.client.view is not None
        return self.client.view

    async def signal(self, name: str, payload: Any) -> None:
        self.client.signals.append((self.wf_id, name))


class Client:
    def __init__(self, view: QueueView | None) -> None:
        self.view = view
        self.status = WorkflowExecutionStatus.RUNNING
        self.signals: list[tuple[str, str]] = []

    def get_workflow_handle(self, wf_id: str) -> Handle:
        return Handle(self, wf_id)

    def told(self) -> list[str]:
        out = [w for w, name in self.signals if name == SIG_REQUEUE]
        self.signals = []
        return out


def fresh(_obj: Any) -> bool:
    return False


def test_which_jobs_may_wait_for_a_placement() -> None:
    assert waiting(job("a")) == "unplaced"
    assert waiting(job("b", "Running", {"c": 1}, replicas=2)) == "unplaced"  # one moves
    assert waiting(job("c", "Scheduled", {"c": 1})) == "scheduled"
    assert waiting(job("d", "Running", {"c": 1})) == ""
    assert waiting(job("e", "Succeeded")) == ""
    assert waiting(job("f", deleting=True)) == ""


@pytest.mark.asyncio
async def test_a_job_missing_from_the_queue_twice_in_a_row_is_told() -> None:
    client = Client(QueueView("run-1", ["ns/queued"]))
    sweep = RequeueSweep(client)  # type: ignore[arg-type]
    jobs = [job("queued"), job("lost"), job("placed", "Scheduled", {"c": 1})]
    assert await sweep.sweep(jobs, fresh) == 0  # once may be a request on its way
    assert client.told() == []
    assert await sweep.sweep(jobs, fresh) == 1
    assert client.told() == ["job/ns/lost"]
    assert await sweep.sweep(jobs, fresh) == 0  # told: given two more passes
    assert await sweep.sweep(jobs, fresh) == 1


@pytest.mark.asyncio
async def test_recent_jobs_are_left_to_the_api() -> None:
    client = Client(QueueView("run-1"))
    sweep = RequeueSweep(client)  # type: ignore[arg-type]
    for _ in range(3):
        assert await sweep.sweep([job("new")], lambda _: True) == 0
    assert client.signals == []


@pytest.mark.asyncio
async def test_a_replaced_scheduler_has_every_waiting_job_ask_again() -> None:
    """A placement recorded in etcd whose signal went with the old scheduler shows the job
    Scheduled while its workflow waits: on a new run chain, Scheduled jobs are told too."""
    client = Client(QueueView("run-1", ["ns/queued"]))
    sweep = RequeueSweep(client)  # type: ignore[arg-type]
    jobs = [job("queued"), job("placed", "Scheduled", {"c": 1}), job("runs", "Running", {"c": 1})]
    assert await sweep.sweep(jobs, fresh) == 0
    client.view = QueueView("run-2", [])
    assert await sweep.sweep(jobs, fresh) == 2
    assert sorted(client.told()) == ["job/ns/placed", "job/ns/queued"]
    assert await sweep.sweep(jobs, fresh) == 0  # the same chain again


@pytest.mark.asyncio
@pytest.mark.parametrize("gone", ["not found", "terminated"])
async def test_no_running_scheduler_has_every_waiting_job_ask_again(gone: str) -> None:
    client = Client(None if gone == "not found" else QueueView("run-1", ["ns/queued"]))
    client.status = WorkflowExecutionStatus.TERMINATED  # its last state still answers queries
    sweep = RequeueSweep(client)  # type: ignore[arg-type]
    assert await sweep.sweep([job("queued")], fresh) == 1
    assert client.told() == ["job/ns/queued"]


def test_which_clusters_a_job_is_stranded_on() -> None:
    running = job("a", "Running", {"x": 1, "y": 1}, replicas=2)
    assert stranded(running, {"y"}) == ["x"]
    assert stranded(running, {"x", "y"}) == []
    assert stranded(job("b", "Succeeded", {"x": 1}), set()) == []
    assert stranded(job("c", "Running", {"x": 1}, deleting=True), set()) == []


@pytest.mark.asyncio
async def test_a_job_placed_on_a_cluster_that_is_gone_is_told_once() -> None:
    """Its replicas there were only ordered, and the cluster's skylet was already gone: nothing
    else tells it (the teardown's fallback finds jobs by a search attribute it does not have
    yet). Told once per cluster, as its finished replicas keep the cluster in its placement."""
    client = Client(QueueView("run-1"))
    sweep = RequeueSweep(client)  # type: ignore[arg-type]
    jobs = [job("moving", "Scheduled", {"gone": 1}), job("fine", "Running", {"here": 1})]
    assert await sweep.sweep(jobs, fresh, {"here"}) == 0  # once may be a status behind
    assert await sweep.sweep(jobs, fresh, {"here"}) == 1
    [(wf_id, name)] = client.signals
    assert (wf_id, name) == ("job/ns/moving", SIG_CLUSTER)
    for _ in range(3):
        assert await sweep.sweep(jobs, fresh, {"here"}) == 0
