"""SchedulerWorkflow with a fake placement activity that runs the real pure scheduler."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract import activity_names as act
from skyshift.contract.jobs import (
    CapacityChanged,
    DequeueRequest,
    EnqueueBatch,
    EnqueueRequest,
    PlaceBatchInput,
    PlaceBatchResult,
    QueueEntry,
    SchedulerConfig,
    SchedulerInput,
    SchedulerState,
)
from skyshift.contract.names import SIG_CAPACITY, SIG_DEQUEUE, SIG_ENQUEUE, SIG_ENQUEUE_MANY
from skyshift.scheduler.types import JobRequest
from skyshift.workflows.scheduler import SchedulerWorkflow
from tests.workflows.fakes import STARTED, Fakes, cpus, unique, workers

pytestmark = pytest.mark.asyncio


def request(name: str, cpu: float, priority: int = 0, created: float = 1.0) -> EnqueueRequest:
    uid = str(uuid.uuid4())
    req = JobRequest(key=f"ns/{name}", uid=uid, namespace="ns", labels={}, priority=priority,
                     created=created, replicas=1, per_replica=cpus(cpu))
    return EnqueueRequest(f"job/ns/{name}", 1, req)


async def start(client: Client, queue: str, cfg: SchedulerConfig | None = None,
                state: SchedulerState | None = None) -> WorkflowHandle[SchedulerWorkflow, None]:
    h = await client.start_workflow(
        SchedulerWorkflow.run, SchedulerInput(state, cfg or SchedulerConfig()),
        id=unique("scheduler-"), task_queue=queue,
    )
    STARTED.append(h)
    return h




async def settle(h: WorkflowHandle[SchedulerWorkflow, None], queued: int) -> SchedulerState:
    """The state once ``queued`` jobs wait and each was tried (30 s at most: a loaded machine)."""
    deadline = time.monotonic() + 30
    while True:
        state = await h.query(SchedulerWorkflow.state)
        if len(state.queue) == queued and all(e.tried_epoch >= 0 for e in state.queue):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"queue did not settle: {state}")
        await asyncio.sleep(0.02)


async def test_priority_then_fifo_in_one_batch(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        # queued before the first round runs: one batch, ordered by priority then age
        reqs = [request("young", 1, 0, 2.0), request("old", 1, 0, 1.0),
                request("urgent", 1, 5, 3.0)]
        h = await start(workflow_env.client, q,
                        state=SchedulerState(queue=[QueueEntry(r) for r in reqs]))
        state = await settle(h, 1)
    batches = fakes.of("place_batch")
    assert len(batches) == 1
    assert [e.req.request.key for e in batches[0].jobs] == ["ns/urgent", "ns/old", "ns/young"]
    assert [e.req.request.key for e in state.queue] == ["ns/young"]
    assert "0/1 clusters fit" in state.queue[0].last_message


async def test_a_round_costs_the_history_one_marker(workflow_env: WorkflowEnvironment) -> None:
    """place_batch runs as a local activity: a round adds a marker to the scheduler's history,
    no activity task and no workflow task for its result (issue #29, Temporal's work per job)."""
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q,
                        state=SchedulerState(queue=[QueueEntry(request("one", 1))]))
        await settle(h, 0)
        kinds = [e.event_type async for e in h.fetch_history_events()]
    assert len(fakes.of("place_batch")) == 1
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds
    assert EventType.EVENT_TYPE_MARKER_RECORDED in kinds


async def test_no_overcommit_across_batches(workflow_env: WorkflowEnvironment) -> None:
    # allocatable never changes (the cluster has not reported yet): only reservations protect it
    fakes = Fakes(allocatable={"a": 4.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        for i in range(5):
            await h.signal(SIG_ENQUEUE, request(f"j{i}", 1.5))
            await asyncio.sleep(0.05)  # separate rounds
        state = await settle(h, 3)
        assert sum(r.count for r in state.reservations) == 2
        assert sum(r.per_replica.cpus * r.count for r in state.reservations) <= 4.0
        assert all(e.last_message for e in state.queue)


async def test_pending_job_placed_when_capacity_appears(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={"a": 1.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        big = request("big", 2)
        await h.signal(SIG_ENQUEUE, big)
        state = await settle(h, 1)
        assert "insufficient resources" in state.queue[0].last_message
        rounds = len(fakes.of("place_batch"))
        # nothing changed: no retry on its own, however long we wait
        await workflow_env.sleep(600)
        assert len(fakes.of("place_batch")) == rounds
        fakes.allocatable["b"] = 4.0
        await h.signal(SIG_CAPACITY, CapacityChanged("b", [], freed=True))
        state = await settle(h, 0)
        assert [r.cluster for r in state.reservations] == ["b"]


async def test_reservation_released_when_cluster_reports(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        first, second = request("first", 2), request("second", 2)
        await h.signal(SIG_ENQUEUE, first)
        await settle(h, 0)
        await h.signal(SIG_ENQUEUE, second)
        state = await settle(h, 1)
        # the cluster now shows the first job in its allocatable (0 free): drop the reservation
        fakes.allocatable["a"] = 0.0
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [first.request.uid], freed=False))
        await asyncio.sleep(0.2)
        state = await h.query(SchedulerWorkflow.state)
        assert not state.reservations and len(state.queue) == 1
        # the first job ends: capacity freed, the second one goes
        fakes.allocatable["a"] = 2.0
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [], freed=True))
        state = await settle(h, 0)
        assert [r.uid for r in state.reservations] == [second.request.uid]


async def test_reservations_expire(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q, SchedulerConfig(reservation_ttl=30.0))
        await h.signal(SIG_ENQUEUE, request("first", 2))
        await settle(h, 0)
        await h.signal(SIG_ENQUEUE, request("second", 2))
        await settle(h, 1)
        await workflow_env.sleep(31)  # never confirmed (e.g. the job was deleted): expires
        state = await settle(h, 0)
        assert [r.key for r in state.reservations] == ["ns/second"]


async def test_dequeue_and_duplicates(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        r = request("x", 1)
        await h.signal(SIG_ENQUEUE, r)
        await h.signal(SIG_ENQUEUE, r)  # a retried enqueue
        state = await settle(h, 1)
        await h.signal(SIG_DEQUEUE, DequeueRequest("ns/x", r.request.uid))
        state = await settle(h, 0)
        assert not state.queue


async def test_requests_sent_together_are_one_signal_event_and_each_queued(
    workflow_env: WorkflowEnvironment,
) -> None:
    """``enqueue_many`` (lifecycle.enqueue.Batcher): every request is queued as its own
    ``enqueue`` would be, a duplicate among them included, and the history has one signal."""
    fakes = Fakes(allocatable={})  # nothing fits: all stay queued, with their reasons
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        reqs = [request(f"b{i}", 1) for i in range(3)]
        await h.signal(SIG_ENQUEUE_MANY, EnqueueBatch([*reqs, reqs[0]]))
        state = await settle(h, 3)
        kinds = [e.event_type async for e in h.fetch_history_events()]
    assert sorted(e.req.request.key for e in state.queue) == ["ns/b0", "ns/b1", "ns/b2"]
    assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) == 1


async def test_continue_as_new_carries_queue(workflow_env: WorkflowEnvironment) -> None:
    fakes = Fakes(allocatable={"a": 0.5})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q, SchedulerConfig(history_limit=30))
        first_run = (await h.describe()).run_id
        for i in range(8):
            await h.signal(SIG_ENQUEUE, request(f"j{i}", 1))
            await asyncio.sleep(0.05)
        state = await settle(h, 8)
        assert (await h.describe()).run_id != first_run
        assert sorted(e.req.request.key for e in state.queue) == [f"ns/j{i}" for i in range(8)]
        fakes.allocatable["a"] = 8.0
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [], freed=True))
        state = await settle(h, 0)
        assert len(state.reservations) == 8


async def test_pending_retried_when_a_reservation_it_counted_twice_is_released(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The skylet writes a cluster's allocatable first and tells the scheduler which jobs it now
    accounts a moment later. A round in between subtracts those jobs twice (from the allocatable
    and as reservations), so a job that fits is judged pending; when the reservation is then
    released the job must be tried again, not wait for capacity that is already there."""
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        first, second = request("first", 1), request("second", 1)
        await h.signal(SIG_ENQUEUE, first)
        await settle(h, 0)
        # the cluster runs the first job (allocatable 1 free) but has not reported it seen yet
        fakes.allocatable["a"] = 1.0
        await h.signal(SIG_ENQUEUE, second)
        state = await settle(h, 1)
        assert "insufficient resources" in state.queue[0].last_message  # counted twice
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [first.request.uid], freed=False))
        state = await settle(h, 0)
        assert sorted(r.key for r in state.reservations) == ["ns/second"]


async def test_reservation_kept_for_replicas_the_cluster_does_not_show_yet(
    workflow_env: WorkflowEnvironment,
) -> None:
    """A job's replicas can appear in the cluster's listing over several sync rounds (a submit
    creates them one by one). Releasing the whole reservation when the first one shows up let
    the next round give the second one's capacity to another job: an overcommit whose replica
    then waits on the cluster for capacity that never frees."""
    fakes = Fakes(allocatable={"a": 2.0})
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        pair = request("pair", 1)
        pair.request.replicas = 2
        await h.signal(SIG_ENQUEUE, pair)
        state = await settle(h, 0)
        assert [r.count for r in state.reservations] == [2]
        # one of its two replicas is listed (and in the allocatable), the other not yet
        fakes.allocatable["a"] = 1.0
        uid = pair.request.uid
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [uid], seen_counts={uid: 1}))
        other = request("other", 1)
        await h.signal(SIG_ENQUEUE, other)
        state = await settle(h, 1)
        assert [e.req.request.key for e in state.queue] == ["ns/other"]
        assert [(r.key, r.count) for r in state.reservations] == [("ns/pair", 1)]
        # the second replica shows up: nothing of the pair is held any more, other still waits
        fakes.allocatable["a"] = 0.0
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [uid], seen_counts={uid: 1}))
        for _ in range(100):
            state = await h.query(SchedulerWorkflow.state)
            if not state.reservations:
                break
            await asyncio.sleep(0.02)
        assert not state.reservations and [e.req.request.key for e in state.queue] == ["ns/other"]


class GatedFakes(Fakes):
    """place_batch decides at once but returns only when ``gate`` is set, like a batch whose
    follow-ups (status writes, signals to many jobs) take a while on a loaded machine."""

    gate: asyncio.Event  # set by the test

    @activity.defn(name=act.PLACE_BATCH)
    async def place_batch(self, inp: PlaceBatchInput) -> PlaceBatchResult:
        result = await Fakes.place_batch(self, inp)
        await self.gate.wait()
        return result


async def test_replicas_reported_before_their_batch_returns_confirm_its_reservation(
    workflow_env: WorkflowEnvironment,
) -> None:
    """A placed job can have its replicas running, and the skylet report them, before the batch
    that placed it has returned. That report must not be lost: the reservation made when the
    batch returns would be held until it expires, counted twice with the allocatable that
    already shows the job, and keep fitting jobs pending all that time."""
    fakes = GatedFakes(allocatable={"a": 2.0})
    fakes.gate = asyncio.Event()
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        first = request("first", 1)
        await h.signal(SIG_ENQUEUE, first)
        await fakes.wait_for("place_batch")
        fakes.allocatable["a"] = 1.0  # its replica runs, and the skylet says so
        uid = first.request.uid
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [uid], seen_counts={uid: 1}))
        await asyncio.sleep(0.2)
        fakes.gate.set()
        await settle(h, 0)
        second = request("second", 1)
        await h.signal(SIG_ENQUEUE, second)
        state = await settle(h, 0)  # placed at once on the cpu that is still free
        assert [r.key for r in state.reservations] == ["ns/second"]


async def test_reservation_confirmed_while_a_batch_judges_a_job_pending_retries_it(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The cluster already shows a placed job in its allocatable, and its confirmation reaches
    the scheduler while the next batch is still out judging another job against both (counted
    twice: pending). That job must be tried again when the batch returns. It waited for an
    unrelated capacity change instead (a job that fits stayed pending until some replica
    ended; 'third pending on both' failed under load)."""
    fakes = GatedFakes(allocatable={"a": 2.0})
    fakes.gate = asyncio.Event()
    fakes.gate.set()
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        wide = request("wide", 1)
        await h.signal(SIG_ENQUEUE, wide)
        await settle(h, 0)
        fakes.allocatable["a"] = 1.0  # its replica runs and the skylet wrote the allocatable
        fakes.gate.clear()
        await h.signal(SIG_ENQUEUE, request("picky", 1))
        await fakes.wait_for("place_batch", 2)  # judged: 1 free - 1 reserved = pending
        uid = wide.request.uid
        await h.signal(SIG_CAPACITY, CapacityChanged("a", [uid], seen_counts={uid: 1}))
        await asyncio.sleep(0.2)
        fakes.gate.set()
        state = await settle(h, 0)  # tried again at once, and placed
        assert [r.key for r in state.reservations] == ["ns/picky"]


class EvictingFakes(Fakes):
    """place_batch evicts ``victims`` on cluster ``where`` for ``preemptor`` when it does not
    fit (the real round's nomination, without etcd)."""

    preemptor = ""
    victims: tuple[str, ...] = ()
    where = ""
    until = 0.0  # the nomination's end, on the test server's clock (it skips ahead of ours)

    @activity.defn(name=act.PLACE_BATCH)
    async def place_batch(self, inp: PlaceBatchInput) -> PlaceBatchResult:
        result = await Fakes.place_batch(self, inp)
        for out, e in zip(result.outcomes, inp.jobs, strict=True):
            if out.key == self.preemptor and out.status == "pending" and not e.nominated:
                out.victims, out.waits_on = list(self.victims), [self.where]
                out.nominated_until = self.until
        return result


async def test_a_victim_queued_again_does_not_take_back_the_room_its_preemptor_waits_for(
    workflow_env: WorkflowEnvironment,
) -> None:
    """Two 1-cpu victims on a 2-cpu cluster, deleted one after the other: the round between the
    two deletes saw 1 cpu free, too little for the 2-cpu preemptor, and placed the first victim
    there again (CI: the preemptor then waited for that victim's whole run)."""
    fakes = EvictingFakes(allocatable={"pe-two": 0.0})
    fakes.preemptor, fakes.victims, fakes.where = "ns/big", ("ns/low-1", "ns/low-2"), "pe-two"
    # earlier tests of the session skipped the server's time ahead (timers of hours and days):
    # a nomination ending an hour after our clock had ended already for the workflow
    fakes.until = (await workflow_env.get_current_time()).timestamp() + 3600
    async with workers(workflow_env.client, fakes, []) as q:
        h = await start(workflow_env.client, q)
        await h.signal(SIG_ENQUEUE, request("big", 2, priority=10, created=3.0))
        state = await settle(h, 1)
        assert state.queue[0].waits_on == ["pe-two"]
        fakes.allocatable["pe-two"] = 1.0  # low-1 is deleted, low-2 not yet
        await h.signal(SIG_ENQUEUE, request("low-1", 1, priority=-5, created=1.0))
        await h.signal(SIG_CAPACITY, CapacityChanged("pe-two", [], freed=True))
        state = await settle(h, 2)
        assert "held for ns/big" in {e.req.request.key: e for e in state.queue}[
            "ns/low-1"].last_message
        fakes.allocatable["pe-two"] = 2.0  # low-2 is gone too
        await h.signal(SIG_CAPACITY, CapacityChanged("pe-two", [], freed=True))
        state = await settle(h, 1)
        assert [e.req.request.key for e in state.queue] == ["ns/low-1"]
        assert [r.key for r in state.reservations] == ["ns/big"]
