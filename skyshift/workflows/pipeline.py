"""PipelineWorkflow (``pipeline/<ns>/<name>``): a DAG of steps, each one a Job it creates.

Pending -> Running -> Succeeded | Failed | Cancelled, or Deleting at any time. The DAG rules live
in :mod:`skyshift.workflows.pipelinestate`; this module sequences them.

* A step whose dependencies are satisfied gets its Job: the ``start_step`` activity renders the
  step's template from the stored Pipeline (parameters substituted; env values never pass
  through Temporal) and creates ``<pipeline>-<step>[-<attempt>]`` with its lifecycle.
* The step's JobWorkflow signals ``child_ended`` when it ends; the pipeline then reads its
  running steps' jobs from etcd (``read_jobs``). It also reads them every ``config.poll``
  seconds without a signal, so a Job deleted by hand fails its step.
* A failed job is run again while the step has retries left; a step that failed for good acts
  by its ``onFailure``. Status (phase, per-step state) is written when it changes.
* ``cancel`` (a spec change): running steps' jobs are deleted, the rest Cancelled.
* Deletion: every job the pipeline created is deleted, then the Pipeline object.
* When the pipeline ends it tells its owner (a scheduled run), if it has one.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.names import (
        QUERY_STATE,
        SIG_CHILD_ENDED,
        WF_PIPELINE,
        pipeline_workflow_id,
    )
    from skyshift.contract.pipelines import (
        PIPELINE_LABEL,
        PIPELINE_TERMINAL,
        ChildEnded,
        DeleteOwnedInput,
        PipelineInput,
        PipelineState,
        PipelineStatusPatch,
        ReadJobsInput,
        ReadJobsResult,
        ReadPipelineInput,
        ReadPipelineResult,
        StartStepInput,
        StartStepResult,
    )
    from skyshift.workflows import pipelinestate as ps
    from skyshift.workflows.common import (
        PHASE,
        STORE_RETRY,
        STORE_TIMEOUT,
        current_keywords,
        history_full,
        remove_object,
        upsert,
        wait,
    )
    from skyshift.workflows.lifecycle import StateLifecycle
    from skyshift.workflows.owner import tell_owner

TEARDOWN_TIMEOUT = timedelta(minutes=10)


def _now() -> str:
    return workflow.now().strftime("%Y-%m-%dT%H:%M:%SZ")


@workflow.defn(name=WF_PIPELINE)
class PipelineWorkflow(StateLifecycle[PipelineInput, PipelineState]):
    input_type = PipelineInput

    @workflow.init
    def __init__(self, inp: PipelineInput) -> None:
        self.inp = inp
        self.s = inp.state or PipelineState(
            phase=inp.phase, steps=ps.initial(inp.steps), cancel=inp.cancel,
            deleting=inp.deleting,
        )
        self.woken = False
        self.spec_dirty = False
        self.dirty = False
        self.failed: list[str] = []  # steps that failed for good since the last look
        self.successor: PipelineInput | None = None
        self.sa: dict[str, str] = {}

    @property
    def wf_id(self) -> str:
        return pipeline_workflow_id(self.inp.namespace, self.inp.name)

    # ---- signals and queries ----------------------------------------------------------------

    @workflow.signal(name=SIG_CHILD_ENDED)
    def child_ended(self, _: ChildEnded) -> None:
        self.woken = True

    def _ensured(self, newer: PipelineInput) -> None:
        if newer.cancel:
            self.s.cancel = True

    @workflow.query(name=QUERY_STATE)
    def state(self) -> PipelineState:
        return self.s

    # ---- main loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: PipelineInput) -> str:
        self.sa = current_keywords()
        if inp.invalid and self.s.phase not in PIPELINE_TERMINAL:
            await self._finish("Failed", inp.invalid)
        while True:
            if self.s.deleting:
                return await self._teardown()
            if self.s.phase in PIPELINE_TERMINAL:
                return self.s.phase
            if self.spec_dirty:
                await self._reload()
                continue
            if self.s.cancel:
                await self._stop("cancelled")
                await self._finish("Cancelled", "cancelled by the user")
                continue
            if self.s.phase == "Pending":
                self.s.phase = "Running"
                await self._write(started=True)
            await self._advance()
            if await self._fail_fast():
                continue
            if (v := ps.verdict(inp.steps, self.s)) is not None:
                await self._finish(*v)
                continue
            if self.dirty:
                await self._write()
            if history_full(inp.config.history_limit):
                await self._continue_as_new(self._carry())
            await wait(self._has_input, timedelta(seconds=inp.config.poll))
            self.woken = False
            await self._look()
            await self._fail_fast()

    def _has_input(self) -> bool:
        return self.woken or self.spec_dirty or self.s.deleting or self.s.cancel

    async def _advance(self) -> None:
        """Start what is ready and skip what cannot run, until nothing changes."""
        while True:
            if ps.skip_blocked(self.inp.steps, self.s, _now()):
                self.dirty = True
            names = ps.ready(self.inp.steps, self.s)
            if not names:
                return
            await asyncio.gather(*(self._start(n) for n in names))

    async def _start(self, step: str) -> None:
        st = self.s.steps[step]
        st.attempts += 1
        res: StartStepResult = await workflow.execute_activity(
            act.START_STEP,
            StartStepInput(self.inp.namespace, self.inp.name, self.inp.uid, step, st.attempts,
                           self.wf_id),
            result_type=StartStepResult, start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
        )
        self.dirty = True
        if res.error:
            st.phase, st.message, st.finished = "Failed", res.error, _now()
            self.failed.append(step)
            return
        st.phase, st.job, st.job_uid = "Running", res.job, res.job_uid
        st.started = st.started or _now()
        st.message = "" if st.attempts == 1 else f"attempt {st.attempts}"

    async def _look(self) -> None:
        jobs = ps.running_jobs(self.s)
        if not jobs:
            return
        got: ReadJobsResult = await workflow.execute_local_activity(
            act.READ_STEP_JOBS, ReadJobsInput(self.inp.namespace, jobs),
            result_type=ReadJobsResult, start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
        )
        defs = {d.name: d for d in self.inp.steps}
        for job, end in got.jobs.items():
            step = ps.step_of_job(self.s, job)
            if step is None or not end.phase:
                continue
            self.dirty = True
            outcome = ps.job_ended(defs[step], self.s.steps[step], end, _now())
            if outcome == "retry":
                self.s.steps[step].phase = "Pending"  # _advance starts the next attempt
            elif outcome == "failed":
                self.failed.append(step)

    async def _fail_fast(self) -> bool:
        """A step with ``onFailure: Fail`` failed for good: stop the rest (True if so)."""
        defs = {d.name: d for d in self.inp.steps}
        first = next((n for n in self.failed if defs[n].on_failure == "Fail"), None)
        self.failed = []
        if first is None:
            return False
        await self._stop(f"stopped: step {first} failed")
        return True

    async def _stop(self, reason: str) -> None:
        doomed = ps.stop_all(self.s, reason, _now())
        self.dirty = True
        if doomed:
            await self._delete_jobs(doomed)

    async def _delete_jobs(self, only: list[str]) -> None:
        """Delete the jobs ``only`` names, or every job the pipeline made when it is empty."""
        await workflow.execute_activity(
            act.DELETE_OWNED,
            DeleteOwnedInput(self.inp.namespace, self.inp.uid, PIPELINE_LABEL, self.inp.name,
                             only=only),
            start_to_close_timeout=STORE_TIMEOUT, schedule_to_close_timeout=TEARDOWN_TIMEOUT,
            retry_policy=STORE_RETRY,
        )

    async def _reload(self) -> None:
        got = await self._read_stored(
            act.READ_PIPELINE, ReadPipelineInput(self.inp.namespace, self.inp.name, self.inp.uid),
            ReadPipelineResult,
        )
        if got is not None and got.cancel:
            self.s.cancel = True

    async def _write(self, *, started: bool = False, finished: bool = False) -> None:
        self.dirty = False
        await workflow.execute_local_activity(
            act.WRITE_PIPELINE_STATUS,
            PipelineStatusPatch(self.inp.namespace, self.inp.name, self.inp.uid, self.s.phase,
                                self.s.message, self.s.steps, self.wf_id, started, finished),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        upsert([(PHASE, self.s.phase)], self.sa)

    async def _finish(self, phase: str, message: str) -> None:
        self.s.phase, self.s.message = phase, message
        await self._write(finished=True)
        await tell_owner(self.inp.owner, self.inp.name, phase)

    async def _teardown(self) -> str:
        upsert([(PHASE, "Deleting")], self.sa)
        await self._delete_jobs([])  # every job it made
        await remove_object("pipelines", self.inp.name, self.inp.uid, self.inp.namespace)
        if self.s.phase not in PIPELINE_TERMINAL:
            await tell_owner(self.inp.owner, self.inp.name, "Deleted")
        return await self._deleted()

    def _carry(self) -> PipelineInput:
        inp = self.inp
        return PipelineInput(
            namespace=inp.namespace, name=inp.name, uid=inp.uid, steps=inp.steps,
            phase=self.s.phase, owner=inp.owner, state=self.s, config=inp.config,
        )
