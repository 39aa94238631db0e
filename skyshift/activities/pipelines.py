"""Control-queue activities of the Pipeline lifecycle: start a step, read steps, clean up.

``start_step`` is idempotent: a retry (or a restarted workflow) that finds the step's Job
already created by this pipeline (its ``skyshift.io/owner-uid``) takes it instead of failing;
a Job of that name that is someone else's is a step failure naming it.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import Client

from skyshift.activities import spawn
from skyshift.activities.store import (
    StoreAndClient,
    get_same,
    stamp_times,
    uid_of,
    update_status,
)
from skyshift.activities.trust import (
    check_name,
    check_owned,
    check_ref,
    check_workflow_id,
    untrusted,
)
from skyshift.contract import activity_names as act
from skyshift.contract.pipelines import (
    OWNER_UID_ANNOTATION,
    PIPELINE_TERMINAL,
    DeleteOwnedInput,
    JobEnd,
    PipelineStatusPatch,
    ReadJobsInput,
    ReadJobsResult,
    ReadPipelineInput,
    ReadPipelineResult,
    StartStepInput,
    StartStepResult,
)
from skyshift.lifecycle.pipeline_convert import step_job
from skyshift.models.base import Obj
from skyshift.models.job import TERMINAL_PHASES
from skyshift.store import NotFound, ObjectStore
from skyshift.store.errors import AlreadyExists

log = logging.getLogger(__name__)


def owned_by(obj: Obj, owner_uid: str) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(owner_uid) and annotations.get(OWNER_UID_ANNOTATION) == owner_uid


def job_end(obj: Obj | None, uid: str) -> JobEnd:
    """What a step's job says: still running (phase ""), ended, or gone."""
    if obj is None or (uid and uid_of(obj) != uid):
        return JobEnd("Gone")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return JobEnd("Gone")
    status = obj.get("status") or {}
    phase = str(status.get("phase") or "")
    return JobEnd(phase if phase in TERMINAL_PHASES else "", str(status.get("message") or ""))


def apply_pipeline_patch(obj: Obj, patch: PipelineStatusPatch) -> Obj | None:
    if patch.uid and uid_of(obj) != patch.uid:
        return None
    status: dict[str, Any] = obj.setdefault("status", {})
    before = repr(status)
    if patch.phase and not (obj.get("metadata") or {}).get("deletionTimestamp"):
        status["phase"] = patch.phase
    status["message"] = patch.message
    status["steps"] = {
        name: {"phase": st.phase, "job": st.job, "attempts": st.attempts,
               "message": st.message, "startTime": st.started or None,
               "completionTime": st.finished or None}
        for name, st in patch.steps.items()
    }
    if patch.workflow_id:
        status["workflowId"] = patch.workflow_id
    stamp_times(status, patch.started, patch.finished)
    return obj if repr(status) != before else None


async def delete_owned(store: ObjectStore, client: Client, inp: DeleteOwnedInput) -> int:
    """Delete the objects ``inp`` names (all the owner's, or ``only`` these, or all but the
    newest ``keep`` finished ones); returns how many were marked."""
    listed = await store.list(inp.plural, inp.namespace, label_selector={inp.label: inp.owner})
    mine = [o for o in listed.items if owned_by(o, inp.owner_uid)]
    if inp.only:
        mine = [o for o in mine if (o.get("metadata") or {}).get("name") in inp.only]
    if inp.keep >= 0:
        done = [o for o in mine
                if (o.get("status") or {}).get("phase") in PIPELINE_TERMINAL]
        done.sort(key=lambda o: str((o.get("metadata") or {}).get("creationTimestamp")))
        mine = done[: max(len(done) - inp.keep, 0)]
    count = 0
    for obj in mine:
        if activity.in_activity():
            activity.heartbeat(count)
        if await spawn.delete_object(store, client, inp.plural, obj):
            count += 1
    return count


class PipelineActivities(StoreAndClient):
    """The Pipeline lifecycle's steps: their jobs created, read and deleted."""

    @activity.defn(name=act.START_STEP)
    async def start_step(self, inp: StartStepInput) -> StartStepResult:
        with untrusted(act.START_STEP):
            check_ref(inp.pipeline, inp.namespace, inp.uid, 'pipeline name')
            check_name(inp.step, 'step')
            check_workflow_id(inp.owner)
        try:
            pipeline = await self.store.get("pipelines", inp.pipeline, inp.namespace)
        except NotFound:
            return StartStepResult(error="the pipeline was deleted")
        if uid_of(pipeline) != inp.uid:
            return StartStepResult(error="the pipeline was replaced")
        try:
            manifest = step_job(pipeline, inp.step, inp.attempt, inp.owner)
        except (ValueError, KeyError, ValidationError) as err:
            return StartStepResult(error=f"cannot make the step's job: {err}")
        name = manifest["metadata"]["name"]
        try:
            created = await spawn.create_and_start(self.store, self.client, manifest)
        except AlreadyExists:
            existing = await self.store.get("jobs", name, inp.namespace)
            if not owned_by(existing, inp.uid):
                return StartStepResult(
                    error=f"a Job named {name} already exists and is not this pipeline's: "
                    "delete it or rename the pipeline"
                )
            await spawn.start_existing(self.client, existing)
            created = existing
        return StartStepResult(job=name, job_uid=uid_of(created))

    @activity.defn(name=act.READ_STEP_JOBS)
    async def read_step_jobs(self, inp: ReadJobsInput) -> ReadJobsResult:
        with untrusted(act.READ_STEP_JOBS):
            for name, uid in inp.jobs.items():
                check_ref(name, inp.namespace, uid, 'job name')
        out = ReadJobsResult()
        for name, uid in inp.jobs.items():
            try:
                obj: Obj | None = await self.store.get("jobs", name, inp.namespace)
            except NotFound:
                obj = None
            out.jobs[name] = job_end(obj, uid)
        return out

    @activity.defn(name=act.DELETE_OWNED)
    async def delete_owned(self, inp: DeleteOwnedInput) -> int:
        with untrusted(act.DELETE_OWNED):
            check_owned(inp)
        return await delete_owned(self.store, self.client, inp)

    @activity.defn(name=act.WRITE_PIPELINE_STATUS)
    async def write_pipeline_status(self, patch: PipelineStatusPatch) -> bool:
        with untrusted(act.WRITE_PIPELINE_STATUS):
            check_ref(patch.name, patch.namespace, patch.uid, 'pipeline name')
        return await update_status(
            self.store, "pipelines", patch.name, patch.namespace,
            lambda o: apply_pipeline_patch(o, patch),
        )

    @activity.defn(name=act.READ_PIPELINE)
    async def read_pipeline(self, inp: ReadPipelineInput) -> ReadPipelineResult:
        with untrusted(act.READ_PIPELINE):
            check_ref(inp.name, inp.namespace, inp.uid, 'pipeline name')
        obj = await get_same(self.store, "pipelines", inp.name, inp.namespace, inp.uid)
        if obj is None:
            return ReadPipelineResult(found=False)
        return ReadPipelineResult(
            found=True, deleting=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
            cancel=bool((obj.get("spec") or {}).get("cancel")),
        )
