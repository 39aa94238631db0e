"""ScheduleWorkflow and ScheduledRunWorkflow on the time-skipping server with same-name fakes.

The Temporal Schedule itself is made, paused and resumed by the ``sync_schedule`` activity
(faked here), so what the workflow owes the user is: sync once at start and on every spec change
(``suspend`` is a spec change), nothing while idle, and on deletion drop the schedule before the
object goes. A run (scheduled or triggered by hand) creates its object and lasts as long as it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import DeleteRequest, SpecChanged
from skyshift.contract.names import SIG_CHILD_ENDED, SIG_DELETE, SIG_ENSURE, SIG_SPEC
from skyshift.contract.pipelines import ChildEnded, RunInput, RunRef, ScheduleInput
from skyshift.workflows.schedule import ScheduledRunWorkflow, ScheduleWorkflow
from tests.workflows.fakes import run_workers, start, unique
from tests.workflows.owned_fakes import ScheduleFakes
from tests.workflows.record import replays

pytestmark = pytest.mark.asyncio
WORKFLOWS: list[type] = [ScheduleWorkflow, ScheduledRunWorkflow]


async def start_schedule(client: Client, q: str, inp: ScheduleInput) -> Any:
    wf_id = f"schedule/{inp.namespace}/{inp.name}"
    return await start(client, ScheduleWorkflow.run, inp, wf_id, q)


async def start_run(client: Client, q: str, inp: RunInput) -> Any:
    wf_id = unique(f"scheduled/{inp.namespace}/{inp.schedule}-")
    return await start(client, ScheduledRunWorkflow.run, inp, wf_id, q)


async def test_synced_on_start_and_spec_change_then_dropped(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = ScheduleFakes()
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        inp = ScheduleInput("ns", unique("s"), str(uuid.uuid4()))
        h = await start_schedule(workflow_env.client, q, inp)
        await fakes.wait_for("sync_schedule")
        await workflow_env.sleep(3600)  # an idle schedule does nothing
        assert fakes.names() == ["sync_schedule"]
        await h.signal(SIG_SPEC, SpecChanged(2))  # e.g. skyctl pause: spec.suspend
        await fakes.wait_for("sync_schedule", 2)
        await h.signal(SIG_DELETE, DeleteRequest(inp.uid))
        assert await h.result() == "Deleted"
    assert fakes.names() == ["sync_schedule", "sync_schedule", "drop_schedule", "remove_object"]
    assert fakes.of("drop_schedule")[0].uid == inp.uid
    assert fakes.of("remove_object")[0].plural == "schedules"
    await replays(h, "schedule_changed_deleted")


async def test_schedule_gone_from_store_is_torn_down(workflow_env: WorkflowEnvironment) -> None:
    fakes = ScheduleFakes()
    fakes.synced.found = False
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        h = await start_schedule(
            workflow_env.client, q, ScheduleInput("ns", unique("s"), str(uuid.uuid4()))
        )
        assert await h.result() == "Deleted"
    assert fakes.names() == ["sync_schedule", "drop_schedule", "remove_object"]


async def test_name_reused_tears_down_then_continues_as_the_new_one(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = ScheduleFakes()
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        inp = ScheduleInput("ns", unique("s"), "uid-old")
        h = await start_schedule(workflow_env.client, q, inp)
        await fakes.wait_for("sync_schedule")
        await h.signal(SIG_ENSURE, ScheduleInput(inp.namespace, inp.name, "uid-new"))
        syncs = await fakes.wait_for("sync_schedule", 2)
        assert syncs[1].uid == "uid-new"
        assert [r.uid for r in fakes.of("drop_schedule")] == ["uid-old"]
        await h.signal(SIG_DELETE, DeleteRequest("uid-new"))
        assert await h.result() == "Deleted"


async def test_run_lasts_as_long_as_its_object(workflow_env: WorkflowEnvironment) -> None:
    fakes = ScheduleFakes()
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        # started by hand (skyctl trigger): no scheduled time, so the run is named by now
        h = await start_run(workflow_env.client, q, RunInput("ns", "nightly", "uid-s", poll=60))
        run = (await fakes.wait_for("start_run"))[0]
        assert run.schedule == "nightly" and run.owner == h.id
        assert run.scheduled.endswith("Z") and "T" in run.scheduled
        await workflow_env.sleep(61)
        await fakes.wait_for("read_run")  # it looks every poll seconds, signal or not
        fakes.run_phase = "Succeeded"
        await h.signal(SIG_CHILD_ENDED, ChildEnded("nightly-1", "Succeeded"))
        assert await h.result() == "Job nightly-1: Succeeded"
    look = fakes.of("read_run")[-1]
    assert (look.kind, look.name, look.uid) == ("Job", "nightly-1", "uid-n1")
    assert fakes.of("stop_run") == []
    await replays(h, "scheduled_run_succeeded")


async def test_cancelled_run_stops_its_object(workflow_env: WorkflowEnvironment) -> None:
    fakes = ScheduleFakes(run=RunRef("Pipeline", "nightly-2", "uid-n2"))
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        h = await start_run(workflow_env.client, q, RunInput("ns", "nightly", "uid-s"))
        await fakes.wait_for("start_run")
        await asyncio.sleep(0.1)
        await h.cancel()  # the schedule's overlap policy CancelOther
        await fakes.wait_for("stop_run")
    assert fakes.of("stop_run")[0].name == "nightly-2"


async def test_run_of_a_deleted_schedule_creates_nothing(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = ScheduleFakes(run=RunRef(message="schedule ns/nightly is gone"))
    async with run_workers(workflow_env.client, WORKFLOWS, fakes.schedule(), [], []) as q:
        h = await start_run(workflow_env.client, q, RunInput("ns", "nightly", "uid-s"))
        assert await h.result() == "nothing run: schedule ns/nightly is gone"
    assert fakes.names() == ["start_run"]
