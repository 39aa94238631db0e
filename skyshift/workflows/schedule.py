"""ScheduleWorkflow (``schedule/<ns>/<name>``) and ScheduledRunWorkflow (one per run).

ScheduleWorkflow keeps the Temporal Schedule of the same id in line with the stored Schedule:
``sync_schedule`` at start and on every spec change (create or update it, paused when
``suspend``), nothing in between (an idle schedule costs no events). Deletion drops the Temporal
Schedule and the runs it created, then removes the object.

The Temporal Schedule starts a ScheduledRunWorkflow (``scheduled/<ns>/<name>-<time>``) per run:
it creates the run's Job or Pipeline (``start_run``), then lasts as long as that object runs,
so the schedule's overlap policy is about the runs themselves. The run's lifecycle signals it
when the object ends (``child_ended``); it also looks every ``poll`` seconds. Cancelled (overlap
policy CancelOther), it stops its object first.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.names import (
        SIG_CHILD_ENDED,
        WF_SCHEDULE,
        WF_SCHEDULED_RUN,
    )
    from skyshift.contract.pipelines import (
        ChildEnded,
        ReadRunResult,
        RunInput,
        RunRef,
        ScheduleInput,
        ScheduleRef,
        ScheduleRunLook,
        StartRunInput,
        SyncScheduleResult,
    )
    from skyshift.workflows.common import (
        STORE_RETRY,
        STORE_TIMEOUT,
        history_full,
        remove_object,
        wait,
    )
    from skyshift.workflows.lifecycle import Lifecycle

SCHEDULED_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
TEARDOWN_TIMEOUT = timedelta(minutes=10)


@workflow.defn(name=WF_SCHEDULE)
class ScheduleWorkflow(Lifecycle[ScheduleInput]):
    input_type = ScheduleInput

    @workflow.init
    def __init__(self, inp: ScheduleInput) -> None:
        self.inp = inp
        self.deleting = inp.deleting
        self.spec_dirty = True
        self.successor: ScheduleInput | None = None

    def _ensured(self, newer: ScheduleInput) -> None:
        self.spec_dirty = True

    @workflow.run
    async def run(self, inp: ScheduleInput) -> str:
        ref = ScheduleRef(inp.namespace, inp.name, inp.uid)
        while True:
            if self.deleting:
                return await self._teardown(ref)
            if self.spec_dirty:
                self.spec_dirty = False
                got: SyncScheduleResult = await workflow.execute_activity(
                    act.SYNC_SCHEDULE, ref, result_type=SyncScheduleResult,
                    start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
                )
                if not got.found or got.deleting:
                    self.deleting = True
                continue
            if history_full(inp.history_limit):
                await self._continue_as_new(ScheduleInput(inp.namespace, inp.name, inp.uid))
            await workflow.wait_condition(lambda: self.spec_dirty or self.deleting)

    async def _teardown(self, ref: ScheduleRef) -> str:
        await workflow.execute_activity(
            act.DROP_SCHEDULE, ref, start_to_close_timeout=STORE_TIMEOUT,
            schedule_to_close_timeout=TEARDOWN_TIMEOUT, retry_policy=STORE_RETRY,
        )
        await remove_object("schedules", ref.name, ref.uid, ref.namespace)
        return await self._deleted()


def _scheduled_time() -> str:
    when: datetime | None = workflow.info().typed_search_attributes.get(SCHEDULED_TIME)
    return (when or workflow.now()).strftime("%Y-%m-%dT%H:%M:%SZ")


@workflow.defn(name=WF_SCHEDULED_RUN)
class ScheduledRunWorkflow:
    def __init__(self) -> None:
        self.woken = False

    @workflow.signal(name=SIG_CHILD_ENDED)
    def child_ended(self, _: ChildEnded) -> None:
        self.woken = True

    @workflow.run
    async def run(self, inp: RunInput) -> str:
        ref = inp.ref
        if ref is None:
            ref = await workflow.execute_activity(
                act.START_RUN,
                StartRunInput(inp.namespace, inp.schedule, inp.uid, _scheduled_time(),
                              workflow.info().workflow_id),
                result_type=RunRef, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
            if not ref.kind:
                return f"nothing run: {ref.message}"
        look = ScheduleRunLook(inp.namespace, ref.kind, ref.name, ref.uid)
        try:
            while True:
                await wait(lambda: self.woken, timedelta(seconds=inp.poll))
                self.woken = False
                got: ReadRunResult = await workflow.execute_local_activity(
                    act.READ_RUN, look, result_type=ReadRunResult,
                    start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
                )
                if got.phase:
                    return f"{ref.kind} {ref.name}: {got.phase}"
                if history_full(inp.history_limit):
                    workflow.continue_as_new(RunInput(inp.namespace, inp.schedule, inp.uid,
                                                      inp.poll, ref, inp.history_limit))
        except asyncio.CancelledError:
            await workflow.execute_activity(
                act.STOP_RUN, look, start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
            )
            raise
