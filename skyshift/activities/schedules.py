"""Control-queue activities of the Schedule lifecycle and of each scheduled run.

``sync_schedule`` makes the Temporal Schedule ``schedule/<ns>/<name>`` say what the stored
Schedule says (create or update, paused or not) and writes the status; ``drop_schedule``
deletes it. ``start_run`` creates one run's Job or Pipeline from the template (idempotent: the
name comes from the scheduled time) and deletes finished runs beyond ``historyLimit``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from skyshift.activities import spawn
from skyshift.activities.pipelines import delete_owned, owned_by
from skyshift.activities.store import get_same, uid_of, update_status
from skyshift.activities.trust import check_ref, check_workflow_id, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.names import (
    CONTROL_QUEUE,
    KIND,
    NAMESPACE,
    WF_SCHEDULED_RUN,
    schedule_workflow_id,
)
from skyshift.contract.pipelines import (
    OWNER_ANNOTATION,
    OWNER_UID_ANNOTATION,
    PIPELINE_TERMINAL,
    SCHEDULE_LABEL,
    SCHEDULED_TIME_ANNOTATION,
    DeleteOwnedInput,
    ReadRunResult,
    RunInput,
    RunRef,
    ScheduleRef,
    ScheduleRunLook,
    StartRunInput,
    SyncScheduleResult,
    schedule_run_prefix,
)
from skyshift.lifecycle import starter
from skyshift.models import rbac
from skyshift.models.base import Obj
from skyshift.models.schedule import OWNER_USER_ANNOTATION, parse_duration
from skyshift.models.schedule import Schedule as ScheduleModel
from skyshift.store import NotFound, ObjectStore
from skyshift.store.errors import AlreadyExists

log = logging.getLogger(__name__)
PLURAL = {"Job": "jobs", "Pipeline": "pipelines"}


def temporal_schedule(model: ScheduleModel) -> Schedule:
    """The Temporal Schedule of a stored Schedule."""
    spec, meta = model.spec, model.metadata
    ns = meta.namespace or "default"
    when = ScheduleSpec(
        cron_expressions=[spec.cron] if spec.cron else [],
        intervals=[ScheduleIntervalSpec(every=timedelta(seconds=parse_duration(spec.interval)))]
        if spec.interval else [],
        time_zone_name=spec.timezone,
    )
    action = ScheduleActionStartWorkflow(
        WF_SCHEDULED_RUN, RunInput(ns, meta.name, meta.uid or ""),
        id=schedule_run_prefix(ns, meta.name), task_queue=CONTROL_QUEUE,
        typed_search_attributes=TypedSearchAttributes(
            [SearchAttributePair(KIND, "ScheduledRun"), SearchAttributePair(NAMESPACE, ns)]
        ),
    )
    return Schedule(
        action=action, spec=when,
        policy=SchedulePolicy(
            overlap=starter.OVERLAP[spec.overlapPolicy],
            catchup_window=timedelta(seconds=parse_duration(spec.catchupWindow)),
        ),
        state=ScheduleState(paused=spec.suspend, note="skyshift: spec.suspend"),
    )


async def next_times(handle: ScheduleHandle, count: int = 3) -> list[str]:
    desc = await handle.describe()
    return [t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            for t in desc.info.next_action_times[:count]]


def run_name(schedule: str, scheduled: str) -> str:
    when = datetime.strptime(scheduled, "%Y-%m-%dT%H:%M:%SZ")
    return f"{schedule}-{when:%Y%m%d-%H%M%S}"


def run_manifest(obj: Obj, model: ScheduleModel, inp: StartRunInput) -> Obj:
    spec = model.spec
    template: Any = spec.jobTemplate or spec.pipelineTemplate
    labels = {**template.metadata.labels, SCHEDULE_LABEL: model.metadata.name}
    return {
        "kind": spec.target_kind,
        "metadata": {
            "name": run_name(model.metadata.name, inp.scheduled),
            "namespace": inp.namespace, "labels": labels,
            "annotations": {OWNER_ANNOTATION: inp.owner, OWNER_UID_ANNOTATION: uid_of(obj),
                            SCHEDULED_TIME_ANNOTATION: inp.scheduled},
        },
        "spec": template.spec.model_dump(mode="json", exclude_none=True),
    }


def check_run_look(inp: ScheduleRunLook) -> None:
    if inp.kind not in PLURAL:
        raise ValueError(f"kind {inp.kind[:40]!r} is not Job or Pipeline")
    check_ref(inp.name, inp.namespace, inp.uid, "run name")


class ScheduleActivities:
    def __init__(self, store: ObjectStore, client: Client) -> None:
        self.store = store
        self.client = client
        #: schedule uid -> the lock start_run holds while it counts and creates (see there);
        #: two control workers can still each start a run at the same moment
        self._starting: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def _read(self, ref: ScheduleRef | StartRunInput) -> Obj | None:
        name = ref.name if isinstance(ref, ScheduleRef) else ref.schedule
        try:
            obj = await self.store.get("schedules", name, ref.namespace)
        except NotFound:
            return None
        return obj if uid_of(obj) == ref.uid else None

    async def _status(self, ref: ScheduleRef, run: tuple[str, str] | None = None,
                      retaken: bool = False, **fields: Any) -> None:
        """``run``: (scheduled time, name) of a new run: counted, and the last one if it is
        the newest (runs of a backfill start side by side, in any order). ``retaken``: the run
        was created by an earlier attempt, which may have died before counting it: counted
        only if it is newer than the last one counted (so never twice; a backfilled run
        retaken after such a crash stays uncounted)."""
        def mutate(obj: Obj) -> Obj | None:
            if uid_of(obj) != ref.uid:
                return None
            status = obj.setdefault("status", {})
            before = repr(status)
            changes = dict(fields)
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                changes.pop("phase", None)
            status.update(changes)
            last = str(status.get("lastScheduleTime") or "")
            if run is not None and not (retaken and run[0] <= last):
                status["runs"] = int(status.get("runs") or 0) + 1
                if run[0] >= last:
                    status["lastScheduleTime"], status["lastRun"] = run
            return obj if repr(status) != before else None

        await update_status(self.store, "schedules", ref.name, ref.namespace, mutate)

    @activity.defn(name=act.SYNC_SCHEDULE)
    async def sync_schedule(self, ref: ScheduleRef) -> SyncScheduleResult:
        with untrusted(act.SYNC_SCHEDULE):
            check_ref(ref.name, ref.namespace, ref.uid, 'schedule name')
        obj = await self._read(ref)
        if obj is None:
            return SyncScheduleResult(found=False)
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return SyncScheduleResult(found=True, deleting=True)
        generation = int(meta.get("generation") or 0)
        wf_id = schedule_workflow_id(ref.namespace, ref.name)
        try:
            model = ScheduleModel.model_validate(obj)
        except ValidationError as err:
            await self._status(ref, phase="Failed", message=f"invalid schedule: {err}",
                               observedGeneration=generation, workflowId=wf_id)
            return SyncScheduleResult(found=True)
        wanted = temporal_schedule(model)
        handle = self.client.get_schedule_handle(wf_id)
        try:
            try:
                await self.client.create_schedule(wf_id, wanted)
            except ScheduleAlreadyRunningError:
                def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
                    return ScheduleUpdate(schedule=wanted)

                await handle.update(replace)
            upcoming = await next_times(handle)
        except RPCError as err:
            if err.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
            await self._status(ref, phase="Failed", message=f"Temporal refused it: {err.message}",
                               observedGeneration=generation, workflowId=wf_id, nextRunTimes=[])
            return SyncScheduleResult(found=True)
        phase = "Paused" if model.spec.suspend else "Active"
        await self._status(ref, phase=phase, message="", observedGeneration=generation,
                           workflowId=wf_id, nextRunTimes=[] if model.spec.suspend else upcoming)
        return SyncScheduleResult(found=True)

    @activity.defn(name=act.DROP_SCHEDULE)
    async def drop_schedule(self, ref: ScheduleRef) -> None:
        """Delete the Temporal Schedule and every run this schedule created."""
        with untrusted(act.DROP_SCHEDULE):
            check_ref(ref.name, ref.namespace, ref.uid, 'schedule name')
        try:
            await self.client.get_schedule_handle(
                schedule_workflow_id(ref.namespace, ref.name)).delete()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        for plural in PLURAL.values():
            await delete_owned(self.store, self.client, DeleteOwnedInput(
                ref.namespace, ref.uid, SCHEDULE_LABEL, ref.name, plural=plural))

    @activity.defn(name=act.START_RUN)
    async def start_run(self, inp: StartRunInput) -> RunRef:
        with untrusted(act.START_RUN):
            check_ref(inp.schedule, inp.namespace, inp.uid, 'schedule name')
            check_workflow_id(inp.owner)
            run_name(inp.schedule, inp.scheduled)  # a time as Temporal writes it
        obj = await self._read(inp)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return RunRef(message="the schedule was deleted")
        try:
            model = ScheduleModel.model_validate(obj)
            manifest = run_manifest(obj, model, inp)
        except (ValidationError, ValueError) as err:  # stored by an older version, say
            return RunRef(message=f"the schedule is invalid: {err}")
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        # From counting the active runs to creating this one, no other run of the schedule
        # starts in this worker: runs due side by side (AllowAll, a backfill, a loaded worker)
        # would otherwise all see room under maxActiveRuns.
        lock = self._starting.setdefault(inp.uid, asyncio.Lock())
        async with lock:
            # The run's object is the record of the decision to start it: a retry whose first
            # attempt created it takes it, however many runs started since (counting them
            # again would say "skipped" about a run that is going).
            created = await self._get_run(PLURAL[kind], name, inp.namespace)
            new = created is None
            if created is None and (why := await self._owner_problem(obj, model)):
                # checked only before creating: a retry takes the run its attempt made
                why = f"run at {inp.scheduled} skipped: {why}"
                await self._status(ScheduleRef(inp.namespace, inp.schedule, inp.uid),
                                   message=why)
                return RunRef(message=why)
            if created is None:
                active = await self._active_runs(inp, uid_of(obj), PLURAL[kind], name)
                if active >= model.spec.maxActiveRuns:
                    why = (f"run at {inp.scheduled} skipped: {active} runs still going "
                           f"(maxActiveRuns {model.spec.maxActiveRuns})")
                    await self._status(ScheduleRef(inp.namespace, inp.schedule, inp.uid),
                                       message=why)
                    return RunRef(message=why)
                try:
                    created = await spawn.create_and_start(self.store, self.client, manifest)
                except ValidationError as err:
                    return RunRef(message=f"the schedule's template makes an invalid {kind}: "
                                  f"{err}")
                except AlreadyExists:  # another control worker created it meanwhile
                    created = await self.store.get(PLURAL[kind], name, inp.namespace)
                    new = False
            if not new:
                if not owned_by(created, uid_of(obj)):
                    return RunRef(message=f"a {kind} named {name} already exists and is not "
                                  "this schedule's")
                await spawn.start_existing(self.client, created)
        ref = ScheduleRef(inp.namespace, inp.schedule, inp.uid)
        await delete_owned(self.store, self.client, DeleteOwnedInput(
            inp.namespace, inp.uid, SCHEDULE_LABEL, inp.schedule,
            keep=model.spec.historyLimit, plural=PLURAL[kind]))
        handle = self.client.get_schedule_handle(schedule_workflow_id(inp.namespace, inp.schedule))
        try:
            upcoming = await next_times(handle)
        except RPCError:
            upcoming = []
        fields: dict[str, Any] = {} if model.spec.suspend else {"nextRunTimes": upcoming}
        if new:
            fields["message"] = ""  # a run started: any "skipped" note is old news
        await self._status(ref, (inp.scheduled, name), retaken=not new, **fields)
        return RunRef(kind, name, uid_of(created))

    async def _get_run(self, plural: str, name: str, namespace: str) -> Obj | None:
        try:
            return await self.store.get(plural, name, namespace)
        except NotFound:
            return None

    async def _owner_problem(self, obj: Obj, model: ScheduleModel) -> str:
        """Why the schedule's owner may not start this run now ("" : it may). The runs are
        created with the control plane's rights, so the owner's are checked at every run: a
        deleted user's schedule, or one whose roles were taken away, stops creating runs. A
        schedule written without auth has no owner and is not checked."""
        owner = ((obj.get("metadata") or {}).get("annotations") or {}).get(OWNER_USER_ANNOTATION)
        if not owner:
            return ""
        try:
            await self.store.get("users", str(owner))
        except NotFound:
            return f"its owner {owner} no longer exists"
        roles = (await self.store.list("roles")).items
        ns = model.metadata.namespace or "default"
        wanted = ["jobs"] + (["pipelines"] if model.spec.pipelineTemplate is not None else [])
        for plural in wanted:
            if not rbac.allowed(roles, str(owner), "create", plural, ns):
                return f"its owner {owner} may no longer create {plural} in namespace {ns}"
        return ""

    async def _active_runs(self, inp: StartRunInput, owner: str, plural: str, run: str) -> int:
        """Runs of the schedule that have not finished, this run itself (a retried start)
        not counted."""
        listed = await self.store.list(plural, inp.namespace,
                                       label_selector={SCHEDULE_LABEL: inp.schedule})
        return sum(
            1 for o in listed.items
            if owned_by(o, owner) and (o.get("metadata") or {}).get("name") != run
            and not (o.get("metadata") or {}).get("deletionTimestamp")
            and (o.get("status") or {}).get("phase") not in PIPELINE_TERMINAL
        )

    @activity.defn(name=act.READ_RUN)
    async def read_run(self, inp: ScheduleRunLook) -> ReadRunResult:
        with untrusted(act.READ_RUN):
            check_run_look(inp)
        obj = await get_same(self.store, PLURAL[inp.kind], inp.name, inp.namespace, inp.uid)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return ReadRunResult("Gone")
        status = obj.get("status") or {}
        phase = str(status.get("phase") or "")
        if phase in PIPELINE_TERMINAL:
            return ReadRunResult(phase, str(status.get("message") or ""))
        return ReadRunResult()

    @activity.defn(name=act.STOP_RUN)
    async def stop_run(self, inp: ScheduleRunLook) -> None:
        """The run was cancelled (overlap policy CancelOther): delete its Job, or cancel its
        Pipeline (which keeps its record)."""
        with untrusted(act.STOP_RUN):
            check_run_look(inp)
        obj = await get_same(self.store, PLURAL[inp.kind], inp.name, inp.namespace, inp.uid)
        if obj is None:
            return
        if inp.kind == "Job":
            await spawn.delete_object(self.store, self.client, "jobs", obj)
            return

        def cancel(current: Obj) -> Obj | None:
            if uid_of(current) != inp.uid or (current.get("spec") or {}).get("cancel"):
                return None
            out = copy.deepcopy(current)
            out["spec"]["cancel"] = True
            out["metadata"]["generation"] = int(out["metadata"].get("generation") or 0) + 1
            return out

        updated = await self.store.guaranteed_update("pipelines", inp.name, inp.namespace, cancel)
        await starter.notify_spec_changed(self.client, updated)

