"""JobWorkflow on the time-skipping test server with fake activities: what it decides, in order."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import (
    DRIFT,
    LATE_VISIBILITY,
    REVISION,
    SUBMIT_ORDERS,
    ClusterEvent,
    JobConfig,
    JobInput,
    JobState,
    JobTemplate,
    Placement,
    ReadJobResult,
    ReplicaReport,
    ReplicaUpdate,
    SpecChanged,
    SubmitInput,
    replica_name,
)
from skyshift.contract.names import (
    PHASE,
    SIG_CLUSTER,
    SIG_ENSURE,
    SIG_PLACED,
    SIG_REPLICAS,
    SIG_SPEC,
)
from skyshift.lifecycle.enqueue import plan_start
from skyshift.workflows.job import JobWorkflow
from tests.workflows.fakes import BY_QUEUE, STARTED, Fakes, cpus, unique, workers

pytestmark = pytest.mark.asyncio
LIFECYCLE = {"revision": 0, "enqueued": 0}


@pytest.fixture(autouse=True, params=[(LATE_VISIBILITY, 0), (REVISION, 0), (REVISION, 1)],
                ids=["submit-activity", "submit-orders", "enqueued-at-start"])
def revision(request: pytest.FixtureRequest) -> Iterator[int]:
    """Every test runs on the lifecycle new jobs get and on the ones before it (running
    workflows keep theirs): replicas started by a submit activity, or by a submit order in etcd
    that the skylet carries out (activities.orders); the job enqueueing itself, or its first
    request sent by the starter beside the start (contract.enqueue), as the API does."""
    LIFECYCLE["revision"], LIFECYCLE["enqueued"] = request.param
    yield int(request.param[0])
    LIFECYCLE.update(revision=0, enqueued=0)  # the modules that import start() get neither


def ordering() -> bool:
    return LIFECYCLE["revision"] >= SUBMIT_ORDERS


def submits_now(fakes: Fakes) -> list[SubmitInput]:
    """The submits asked of the clusters so far: activities, or orders written."""
    if ordering():
        return [o.submit for o in fakes.of("post_submit_order")]
    return list(fakes.of("submit_replicas"))


async def submits(fakes: Fakes, count: int = 1) -> list[SubmitInput]:
    await fakes.wait_for("post_submit_order" if ordering() else "submit_replicas", count)
    return submits_now(fakes)


def job(replicas: int = 1, policy: str = "OnFailure", max_restarts: int = 3,
        history_limit: int = 2000, backoff: float = 1.0) -> JobInput:
    return JobInput(
        namespace="ns", name=unique("j"), uid=str(uuid.uuid4()), generation=1, created=1.0,
        template=JobTemplate(run="true", resources=cpus(1), replicas=replicas,
                             restart_policy=policy, max_restarts=max_restarts),
        config=JobConfig(backoff_base=backoff, backoff_max=8.0, history_limit=history_limit),
        revision=LIFECYCLE["revision"],
    )


async def start(client: Client, queue: str, inp: JobInput) -> WorkflowHandle[JobWorkflow, str]:
    """Start the job's workflow; in the enqueued-at-start mode as the API's starter does, with
    its first request to the scheduler (the fake's enqueue_job call) beside it."""
    first = None
    if LIFECYCLE["enqueued"]:
        inp, first = plan_start(inp, time.time())
    h = await client.start_workflow(
        JobWorkflow.run, inp, id=f"job/{inp.namespace}/{inp.name}", task_queue=queue
    )
    STARTED.append(h)
    if first is not None:
        BY_QUEUE[queue].calls.append(("enqueue_job", first))
    return h


async def place(h: WorkflowHandle[JobWorkflow, str], fakes: Fakes, n: int,
                assignments: dict[str, int]) -> None:
    req = (await fakes.wait_for("enqueue_job", n))[n - 1]
    await h.signal(SIG_PLACED, Placement(req.seq, assignments))


async def report(h: WorkflowHandle[JobWorkflow, str], inp: JobInput, cluster: str, rank: int,
                 attempt: int, state: str, code: int | None = None,
                 finished: bool = False) -> None:
    """A skylet's report of one replica; ``finished``: it wrote the job Succeeded."""
    name = replica_name(inp.name, inp.uid, rank)
    await h.signal(SIG_REPLICAS, ReplicaReport(cluster, [
        ReplicaUpdate(name, rank, attempt, state, code, "Error" if code else "")], finished))


async def test_runs_to_success(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        submit = (await submits(fakes))[0]
        assert [s.name for s in submit.replicas] == [
            replica_name(inp.name, inp.uid, 0), replica_name(inp.name, inp.uid, 1)]
        # the adapter gets the job's policy (Kubernetes runs Always replicas as Deployments)
        assert all(s.restart_policy == "OnFailure" for s in submit.replicas)
        for rank in (0, 1):
            await report(h, inp, a, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
    final = fakes.of("write_job_status")[-1]
    assert final.phase == "Succeeded" and final.finished
    assert final.replica_status == {a: {"Pending": 0, "Running": 0, "Succeeded": 2,
                                        "Failed": 0, "Unknown": 0}}


async def test_success_the_skylet_wrote_is_not_written_again(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The skylet that counts the last replica Succeeded writes the job's final phase and says
    so in its report (``finished``): the workflow ends Succeeded, tells the Temporal UI, and
    writes nothing more. A report without it (an older skylet) leaves the write to the
    workflow, as test_runs_to_success shows."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        await submits(fakes)
        await report(h, inp, a, 0, 0, "Succeeded", 0)
        await report(h, inp, a, 1, 0, "Succeeded", 0, finished=True)
        assert await h.result() == "Succeeded"
        events = [e async for e in h.fetch_history_events()]
    assert not [p for p in fakes.of("write_job_status") if p.finished]
    upserts = [e for e in events
               if e.HasField("upsert_workflow_search_attributes_event_attributes")]
    assert b"Succeeded" in upserts[-1].SerializeToString()


async def test_a_write_after_the_skylets_success_is_written_over_by_the_verdict(
    workflow_env: WorkflowEnvironment,
) -> None:
    """``finished`` came with rank 1's report while rank 0 was still running, and the workflow
    wrote the status since (rank 0 restarted, its restart count): the skylet's phase may be
    overwritten, so the verdict is written by the workflow."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2, max_restarts=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        await submits(fakes)
        await report(h, inp, a, 1, 0, "Succeeded", 0, finished=True)
        writes = len(fakes.of("write_job_status"))
        await report(h, inp, a, 0, 0, "Failed", 3)
        await fakes.wait_for("write_job_status", writes + 1)  # the restart count
        await workflow_env.sleep(1.0)  # the backoff
        await submits(fakes, 2)
        await report(h, inp, a, 0, 1, "Succeeded", 0)
        assert await h.result() == "Succeeded"
    final = fakes.of("write_job_status")[-1]
    assert final.phase == "Succeeded" and final.finished and final.restarts == 1


async def test_search_attributes_show_the_phase_the_submit_led_to(
    workflow_env: WorkflowEnvironment,
) -> None:
    """What the Temporal UI shows of a job: Running on its cluster once its replica started,
    set in one visibility update (none for the moment between placement and the submit's
    result, which the submit's result ends anyway; with submit orders, none until the skylet's
    first report of the replica)."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        # started as the starter does: the phase Pending set at start
        h = await workflow_env.client.start_workflow(
            JobWorkflow.run, inp, id=f"job/{inp.namespace}/{inp.name}", task_queue=q,
            search_attributes=TypedSearchAttributes([SearchAttributePair(PHASE, "Pending")]))
        STARTED.append(h)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes)
        if ordering():
            await report(h, inp, a, 0, 0, "Running")
        for _ in range(200):
            if (await h.query(JobWorkflow.state)).phase == "Running":
                break
            await asyncio.sleep(0.05)
        upserts = [
            {k: json.loads(v.data) for k, v in e.upsert_workflow_search_attributes_event_attributes
             .search_attributes.indexed_fields.items()}
            async for e in h.fetch_history_events()
            if e.HasField("upsert_workflow_search_attributes_event_attributes")
        ]
        assert upserts == [{"SkyShiftPhase": "Running", "SkyShiftCluster": a}]


async def test_restart_with_backoff_then_failed(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(max_restarts=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes, 1)
        for attempt, backoff in ((0, 1.0), (1, 2.0)):
            await report(h, inp, a, 0, attempt, "Failed", 3)
            await fakes.wait_for("write_job_status", attempt + 1)  # the restart count
            before = await workflow_env.get_current_time()
            await workflow_env.sleep(backoff)  # skip the backoff
            await submits(fakes, attempt + 2)
            waited = (await workflow_env.get_current_time() - before).total_seconds()
            assert waited >= backoff - 0.1, waited
            resubmit = submits_now(fakes)[-1]
            assert resubmit.replicas[0].attempt == attempt + 1
            assert resubmit.cluster == a
        await report(h, inp, a, 0, 2, "Failed", 3)
        assert await h.result() == "Failed"
    final = fakes.of("write_job_status")[-1]
    assert final.phase == "Failed" and final.restarts == 2
    assert "maxRestarts (2)" in (final.message or "")
    # only the enqueue ever went to the scheduler: restarts stay on their cluster
    assert len(fakes.of("enqueue_job")) == 1


async def test_stale_reports_are_ignored(workflow_env: WorkflowEnvironment) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(policy="Never")
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes)
        await report(h, inp, b, 0, 0, "Failed", 1)  # wrong cluster
        await report(h, inp, a, 0, 5, "Failed", 1)  # wrong attempt
        await report(h, inp, a, 0, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"


async def submit_result_taken(h: WorkflowHandle[JobWorkflow, str]) -> None:
    """With submit activities: wait until the workflow has taken the submit's result (its
    replicas Running). A ``lost`` event while the activity's completion is on its way makes the
    workflow cancel an activity the server already counts as done: the workflow task fails
    (ACTIVITY_UNKNOWN) and runs again only after its timeout, which a loaded machine made
    longer than the test's wait (seen twice under load, in this mode only)."""
    if ordering():
        return
    for _ in range(600):
        state = await h.query(JobWorkflow.state)
        if state.replicas and all(r.state == "Running" for r in state.replicas):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the submit's result was never taken: {state}")


async def test_failover_replaces_elsewhere_and_cleans_up(workflow_env: WorkflowEnvironment) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        await submits(fakes)
        await submit_result_taken(h)
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "lost", "gone"))
        again = (await fakes.wait_for("enqueue_job", 2))[1]
        assert again.request.replicas == 2 and again.current == {}
        await h.signal(SIG_PLACED, Placement(again.seq, {b: 2}))
        moved = (await submits(fakes, 2))[1]
        assert moved.cluster == b and len(moved.replicas) == 2
        # a late report from the lost cluster must not count
        await report(h, inp, a, 0, 0, "Failed", 1)
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "recovered"))
        cleanup = (await fakes.wait_for("delete_replicas"))[0]
        assert cleanup.cluster == a
        assert sorted(cleanup.names) == sorted(s.name for s in moved.replicas)
        state = await h.query(JobWorkflow.state)
        assert {r.cluster for r in state.replicas} == {b} and state.restarts == 0
        for rank in (0, 1):
            await report(h, inp, b, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"


async def test_replicas_queued_in_a_lost_cluster_move_like_running_ones(
    workflow_env: WorkflowEnvironment,
) -> None:
    """Issue #16: a batch cluster may hold replicas in its own queue (Pending there); when it
    is lost they move elsewhere just as running ones do, and are cleaned up when it returns."""
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(replicas=2)
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 2})
        await submits(fakes)
        await submit_result_taken(h)
        await report(h, inp, a, 0, 0, "Running")
        await report(h, inp, a, 1, 0, "Pending")  # waiting in the cluster's queue
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "lost", "gone"))
        again = (await fakes.wait_for("enqueue_job", 2))[1]
        assert again.request.replicas == 2 and again.current == {}
        await h.signal(SIG_PLACED, Placement(again.seq, {b: 2}))
        moved = (await submits(fakes, 2))[1]
        assert moved.cluster == b and [s.rank for s in moved.replicas] == [0, 1]
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "recovered"))
        cleanup = (await fakes.wait_for("delete_replicas"))[0]
        assert cleanup.cluster == a and len(cleanup.names) == 2
        for rank in (0, 1):
            await report(h, inp, b, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"


async def test_scaling_up_and_down(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=1, policy="Always")
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes)
        assert inp.template is not None
        bigger = JobTemplate(**{**inp.template.__dict__, "replicas": 3})
        fakes.read_result = ReadJobResult(True, 2, bigger)
        await h.signal(SIG_SPEC, SpecChanged(2))
        more = (await fakes.wait_for("enqueue_job", 2))[1]
        assert more.request.replicas == 2 and more.current == {a: 1}
        await h.signal(SIG_PLACED, Placement(more.seq, {a: 2}))
        added = (await submits(fakes, 2))[1]
        assert [s.rank for s in added.replicas] == [1, 2]
        fakes.read_result = ReadJobResult(True, 3, JobTemplate(**{**bigger.__dict__,
                                                                  "replicas": 1}))
        await h.signal(SIG_SPEC, SpecChanged(3))
        down = (await fakes.wait_for("delete_replicas"))[0]
        assert sorted(down.names) == [replica_name(inp.name, inp.uid, r) for r in (1, 2)]
        state = await h.query(JobWorkflow.state)
        assert len(state.replicas) == 1 and state.generation == 3
        await h.signal(SIG_ENSURE, JobInput(**{**inp.__dict__, "deleting": True}))
        assert await h.result() == "Deleted"


async def test_deletion_tears_down_everywhere_then_removes(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job(replicas=2, policy="Always")
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1, b: 1})
        await submits(fakes, 2)
        await h.signal(SIG_ENSURE, JobInput(**{**inp.__dict__, "deleting": True}))
        assert await h.result() == "Deleted"
    names = fakes.names()
    deletes = [i for i, n in enumerate(names) if n == "delete_replicas"]
    assert len(deletes) == 2 and max(deletes) < names.index("remove_object")
    assert {d.cluster for d in fakes.of("delete_replicas")} == {a, b}
    assert all(d.job_uid == inp.uid for d in fakes.of("delete_replicas"))
    assert fakes.of("remove_object")[0].uid == inp.uid


async def test_deleting_while_pending_dequeues(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("enqueue_job")
        await h.signal(SIG_ENSURE, JobInput(**{**inp.__dict__, "deleting": True}))
        assert await h.result() == "Deleted"
    assert fakes.of("dequeue_job")[0].uid == inp.uid
    assert not fakes.of("delete_replicas")


async def test_permanent_submit_error_fails_the_job(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(submit_error="Permanent"), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        h = await start(workflow_env.client, q, job())
        await place(h, fakes, 1, {a: 1})
        assert await h.result() == "Failed"
    final = fakes.of("write_job_status")[-1]
    assert final.phase == "Failed" and "it can never run" in (final.message or "")


async def test_invalid_spec_fails_with_message(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        inp.invalid = "invalid job spec: spec.replicas: must be >= 0"
        assert await (await start(workflow_env.client, q, inp)).result() == "Failed"
    assert fakes.of("write_job_status")[-1].message == inp.invalid
    assert not fakes.of("enqueue_job")


async def test_continue_as_new_keeps_state(workflow_env: WorkflowEnvironment) -> None:
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2, policy="Always", max_restarts=50, history_limit=40, backoff=0.01)
        h = await start(workflow_env.client, q, inp)
        first_run = (await h.describe()).run_id
        await place(h, fakes, 1, {a: 2})
        await submits(fakes)
        for attempt in range(4):
            await report(h, inp, a, 0, attempt, "Failed", 1)
            await submits(fakes, attempt + 2)
            await workflow_env.sleep(0.1)
        state: JobState = await h.query(JobWorkflow.state)
        assert (await h.describe()).run_id != first_run
        assert state.restarts == 4 and state.replicas[0].attempt == 4
        assert [r.cluster for r in state.replicas] == [a, a]
        await report(h, inp, a, 1, 0, "Failed", 1)  # still tracked after continue-as-new
        await submits(fakes, 6)
        assert submits_now(fakes)[-1].replicas[0].rank == 1
        await h.signal(SIG_ENSURE, JobInput(**{**inp.__dict__, "deleting": True}))
        assert await h.result() == "Deleted"


async def test_status_of_a_move_is_written_before_asking_for_a_new_placement(
    workflow_env: WorkflowEnvironment,
) -> None:
    """The scheduler writes the new placement to the job's status as soon as it places it; the
    job's own write of the move ('moving 1 replicas elsewhere', placement {}) must come before
    it asks, or it can land after the scheduler's and leave the job showing no placement."""
    fakes, a, b = Fakes(), unique("a"), unique("b")
    async with workers(workflow_env.client, fakes, [a, b]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes)
        await h.signal(SIG_CLUSTER, ClusterEvent(a, "deleted", "cluster deleted"))
        await fakes.wait_for("enqueue_job", 2)
    first = "post_submit_order" if ordering() else "submit_replicas"
    after_event = fakes.names()[fakes.names().index(first) + 1:]
    moving = [i for i, (n, p) in enumerate(fakes.calls) if n == "write_job_status"
              and p.message and "moving 1 replicas" in p.message]
    assert moving, after_event
    second_enqueue = [i for i, (n, _) in enumerate(fakes.calls) if n == "enqueue_job"][1]
    assert moving[0] < second_enqueue, after_event


async def test_a_placement_that_arrives_before_its_enqueue_is_taken_not_asked_again(
    workflow_env: WorkflowEnvironment,
) -> None:
    """Under load a workflow task can time out after its enqueue_job local activity ran: the
    scheduler has the request and answers before the task is retried, so the retried task sees
    the placement before it enqueues. It must take that placement (and not enqueue the same
    request again, which the scheduler would place a second time or drop as a duplicate while
    the job waited requeue_after). The placement is delivered with the start here, which puts
    it in the first workflow task, as in that history."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job(replicas=2)
        h = await workflow_env.client.start_workflow(
            JobWorkflow.run, inp, id=f"job/{inp.namespace}/{inp.name}", task_queue=q,
            start_signal=SIG_PLACED, start_signal_args=[Placement(1, {a: 2})],
        )
        STARTED.append(h)
        submit = (await submits(fakes))[0]
        assert submit.cluster == a and len(submit.replicas) == 2
        assert not fakes.of("enqueue_job")
        for rank in (0, 1):
            await report(h, inp, a, rank, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
    assert not fakes.of("enqueue_job")


async def test_drift_writes_the_workflows_placement_back(workflow_env: WorkflowEnvironment) -> None:
    """Issue 32: a skylet found this job's replica on its cluster while etcd's placement named
    another cluster. The workflow is where the replicas are: told so, it writes its placement."""
    fakes, a = Fakes(), unique("a")
    async with workers(workflow_env.client, fakes, [a]) as q:
        inp = job()
        h = await start(workflow_env.client, q, inp)
        await place(h, fakes, 1, {a: 1})
        await submits(fakes)
        await report(h, inp, a, 0, 0, "Running")
        before = len(fakes.of("write_job_status"))
        await h.signal(SIG_CLUSTER, ClusterEvent(a, DRIFT, "stored placement misses it"))
        writes = await fakes.wait_for("write_job_status", before + 1)
        assert writes[-1].placement == {a: 1}
        state = await h.query(JobWorkflow.state)
        assert [(r.cluster, r.state) for r in state.replicas] == [(a, "Running")]
        await report(h, inp, a, 0, 0, "Succeeded", 0)
        assert await h.result() == "Succeeded"
