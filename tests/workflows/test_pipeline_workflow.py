"""PipelineWorkflow on the time-skipping server with same-name fake activities: the order its
steps start in, retries, a failing step stopping the rest, cancel and deletion, as the phases
and step states a user reads in ``skyctl get pipeline``."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import DeleteRequest
from skyshift.contract.names import SIG_CHILD_ENDED, SIG_DELETE, SIG_ENSURE, pipeline_workflow_id
from skyshift.contract.pipelines import (
    ChildEnded,
    JobEnd,
    PipelineConfig,
    PipelineInput,
    PipelineState,
    StepDef,
)
from skyshift.workflows.pipeline import PipelineWorkflow
from tests.workflows.fakes import run_workers, unique
from tests.workflows.fakes import start as start_tracked
from tests.workflows.owned_fakes import PipelineFakes
from tests.workflows.record import replays

pytestmark = pytest.mark.asyncio
Handle = WorkflowHandle[PipelineWorkflow, str]


def pipeline(*steps: StepDef) -> PipelineInput:
    return PipelineInput(
        "ns", unique("p"), str(uuid.uuid4()), list(steps), config=PipelineConfig(poll=30.0)
    )


async def start(client: Client, queue: str, inp: PipelineInput) -> Handle:
    wf_id = pipeline_workflow_id(inp.namespace, inp.name)
    h: Handle = await start_tracked(client, PipelineWorkflow.run, inp, wf_id, queue)
    return h


async def state_where(h: Handle, what: str, ok: object) -> PipelineState:
    for _ in range(300):
        s = await h.query(PipelineWorkflow.state)
        if ok(s):  # type: ignore[operator]
            return s
        await asyncio.sleep(0.02)
    raise AssertionError(f"never {what}: {await h.query(PipelineWorkflow.state)}")


async def end_job(h: Handle, fakes: PipelineFakes, job: str, phase: str, msg: str = "") -> None:
    """The step's job ends; its lifecycle tells the pipeline (``child_ended``)."""
    fakes.ends[job] = JobEnd(phase, msg)
    await h.signal(SIG_CHILD_ENDED, ChildEnded(job, phase))


def started_steps(fakes: PipelineFakes) -> list[tuple[str, int]]:
    return [(s.step, s.attempt) for s in fakes.of("start_step")]


async def test_steps_run_in_dependency_order(workflow_env: WorkflowEnvironment) -> None:
    fakes = PipelineFakes()
    async with run_workers(workflow_env.client, [PipelineWorkflow], fakes.pipeline(), [], []) as q:
        inp = pipeline(StepDef("prep"), StepDef("lint"), StepDef("train", ["prep", "lint"]))
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("start_step", 2)
        s = await state_where(h, "Running", lambda s: s.phase == "Running")
        assert {n: st.phase for n, st in s.steps.items()} == {
            "prep": "Running",
            "lint": "Running",
            "train": "Pending",
        }
        await end_job(h, fakes, f"{inp.name}-prep", "Succeeded")
        await asyncio.sleep(0.2)
        assert len(fakes.of("start_step")) == 2  # train still waits for lint
        await end_job(h, fakes, f"{inp.name}-lint", "Succeeded")
        await fakes.wait_for("start_step", 3)
        await end_job(h, fakes, f"{inp.name}-train", "Succeeded")
        assert await h.result() == "Succeeded"
    steps = started_steps(fakes)  # the steps of one round start together, in any order
    assert sorted(steps[:2]) == [("lint", 1), ("prep", 1)] and steps[2:] == [("train", 1)]
    final = fakes.of("write_pipeline_status")[-1]
    assert (final.phase, final.message, final.finished) == (
        "Succeeded",
        "3 of 3 steps succeeded",
        True,
    )
    assert fakes.of("write_pipeline_status")[0].started
    await replays(h, "pipeline_succeeded")


async def test_failed_step_is_retried_then_fails_the_pipeline(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = PipelineFakes()
    async with run_workers(workflow_env.client, [PipelineWorkflow], fakes.pipeline(), [], []) as q:
        inp = pipeline(StepDef("flaky", retries=1), StepDef("slow"), StepDef("after", ["flaky"]))
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("start_step", 2)
        await end_job(h, fakes, f"{inp.name}-flaky", "Failed", "exit 1")
        await fakes.wait_for("start_step", 3)  # attempt 2, a job of its own name
        s = await state_where(h, "retrying", lambda s: s.steps["flaky"].attempts == 2)
        assert s.steps["flaky"].job == f"{inp.name}-flaky-2"
        await end_job(h, fakes, f"{inp.name}-flaky-2", "Failed", "exit 1")
        assert await h.result() == "Failed"
    steps = started_steps(fakes)
    assert sorted(steps[:2]) == [("flaky", 1), ("slow", 1)] and steps[2:] == [("flaky", 2)]
    # onFailure Fail: the step still running is stopped (its job deleted), the rest skipped
    assert fakes.of("delete_owned")[0].only == [f"{inp.name}-slow"]
    final = fakes.of("write_pipeline_status")[-1]
    assert final.phase == "Failed"
    assert final.message == "step flaky failed: failed after 2 attempts: exit 1"
    assert {n: st.phase for n, st in final.steps.items()} == {
        "flaky": "Failed",
        "slow": "Cancelled",
        "after": "Skipped",
    }
    await replays(h, "pipeline_retried_failed")


async def test_cancel_then_delete(workflow_env: WorkflowEnvironment) -> None:
    fakes = PipelineFakes()
    async with run_workers(workflow_env.client, [PipelineWorkflow], fakes.pipeline(), [], []) as q:
        inp = pipeline(StepDef("a"), StepDef("b", ["a"]))
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("start_step")
        cancel = PipelineInput(inp.namespace, inp.name, inp.uid, inp.steps, cancel=True)
        await h.signal(SIG_ENSURE, cancel)
        await state_where(h, "Cancelled", lambda s: s.phase == "Cancelled")
        final = fakes.of("write_pipeline_status")[-1]
        assert (final.phase, final.message) == ("Cancelled", "cancelled by the user")
        assert {n: st.phase for n, st in final.steps.items()} == {
            "a": "Cancelled",
            "b": "Cancelled",
        }
        assert fakes.of("delete_owned")[0].only == [f"{inp.name}-a"]
    # a finished pipeline's workflow has ended; deletion starts it again with deleting set
    fakes2 = PipelineFakes()
    async with run_workers(workflow_env.client, [PipelineWorkflow], fakes2.pipeline(), [], []) as q:
        inp2 = pipeline(StepDef("a"))
        h2 = await start(workflow_env.client, q, inp2)
        await fakes2.wait_for("start_step")
        await h2.signal(SIG_DELETE, DeleteRequest(inp2.uid))
        assert await h2.result() == "Deleted"
    assert fakes2.names()[-2:] == ["delete_owned", "remove_object"]
    assert fakes2.of("delete_owned")[0].only == []  # every job it made
    assert fakes2.of("remove_object")[0].plural == "pipelines"
    await replays(h, "pipeline_cancelled")
    await replays(h2, "pipeline_deleted")


async def test_step_that_cannot_start_fails_without_a_job(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = PipelineFakes(step_errors={"a": "job name taken by another object"})
    async with run_workers(workflow_env.client, [PipelineWorkflow], fakes.pipeline(), [], []) as q:
        h = await start(workflow_env.client, q, pipeline(StepDef("a")))
        assert await h.result() == "Failed"
    final = fakes.of("write_pipeline_status")[-1]
    assert final.message == "step a failed: job name taken by another object"
    assert fakes.of("delete_owned") == []
