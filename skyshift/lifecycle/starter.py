"""The API's entry points into the lifecycle plane (Temporal client calls only, no etcd).

``ensure_lifecycle`` / ``notify_spec_changed`` / ``notify_deleting`` are all signal-with-start
with id-conflict policy USE_EXISTING (a missing or finished workflow is started, a running one is
signalled; ``ensure`` is left out of a start, whose input says the same), so each is
idempotent, a crash between the etcd write and the call is repaired by the reconciler doing the
same call, and a finished job can still be deleted. Job workflows get the ``ensure`` signal
carrying the object's uid: a workflow still tearing down an older object of
the same name hands over to the new one (continue-as-new) instead of swallowing it; Service
workflows (``service/<ns>/<name>``) get the same ``ensure`` signal with their own input.

``fetch_logs`` / ``exec_in_replica`` run a short ReplicaOpWorkflow that calls the replica's
cluster. Errors are the compat ones (``NotFound``, ``Unsupported``, ``Transient``), which the
API maps to HTTP statuses.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    WorkflowFailureError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import TimeoutError as TemporalTimeout
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from skyshift.compat.errors import NotFound, Permanent, Transient, Unsupported
from skyshift.contract.enqueue import START_DELAY
from skyshift.contract.jobs import (
    DeleteRequest,
    ReplicaOpInput,
    ReplicaOpResult,
    RulesChanged,
    SpecChanged,
    replica_name,
)
from skyshift.contract.lifecycles import BY_KIND, Lifecycle, lifecycle_of
from skyshift.contract.links import LinkInput
from skyshift.contract.names import (
    CONTROL_QUEUE,
    KIND,
    PHASE,
    SCHEDULER_ID,
    SCOPE,
    SIG_DELETE,
    SIG_ENSURE,
    SIG_RULES,
    SIG_SPEC,
    WF_REPLICA_OP,
    schedule_workflow_id,
)
from skyshift.contract.pipelines import ScheduleInput
from skyshift.lifecycle.convert import cluster_input, job_input, status_clusters
from skyshift.lifecycle.enqueue import plan_start, send_first
from skyshift.lifecycle.pipeline_convert import pipeline_input
from skyshift.lifecycle.service_convert import service_input
from skyshift.models.base import Obj

OP_TIMEOUT = timedelta(seconds=120)
# logs answer or say why: each cluster's skylet gets this long (one attempt's start-to-close),
# the whole read at most LOGS_BUDGET, then the API answers 504 naming the clusters: before the
# client's timeout of a logs read (client/base.py LOGS_READ_TIMEOUT, 60 s), so the user reads
# why. A SkyPilot `sky logs` (a SkyPilot process, SSH to the node) took over 15 s on a loaded
# machine: its adapter's bound is 40 s
LOGS_TIMEOUT = 45.0
LOGS_BUDGET = 50.0


class OpTimeout(Transient):
    """A logs or exec op ran out of time on the clusters (the API answers 504)."""


def _meta(obj: Obj) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


async def _signal_with_start(
    client: Client, obj: Obj, signal: str, payload: Any, inp: Any = None,
    signal_only_running: bool = False,
) -> str:
    """``inp``: the workflow input when the caller already converted ``obj`` (the ensure signal
    of Jobs and Services carries it too): converted once, not once per use.

    ``signal_only_running``: the signal says nothing the input does not (``ensure``), so a
    workflow started now goes without it: a plain start first, and signal-with-start only when
    one already runs. The signal would cost the new workflow's history an event (one in 26 of a
    job's, bench/temporal_cost.py); the second call is for the rare ensure of a running one
    (the reconciler ensures only objects whose workflow it does not see)."""
    lc = lifecycle_of(obj.get("kind"))
    inp = inp or INPUTS[lc.kind](obj)
    wf_id = lc.workflow_id(getattr(inp, "namespace", None), inp.name)
    start = functools.partial(
        client.start_workflow, lc.workflow, id=wf_id, task_queue=CONTROL_QUEUE,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        memo={"uid": _meta(obj).get("uid") or ""},
        search_attributes=TypedSearchAttributes(_attributes(lc, obj, inp)),
    )
    if signal_only_running:
        # A new job's first placement request goes beside its start (lifecycle/enqueue.py);
        # a job started by the signal-with-start below (a race) enqueues itself
        fresh, first = plan_start(inp, time.time()) if lc.kind == "Job" else (inp, None)
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await start(fresh, id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                        start_delay=START_DELAY if first is not None else None)
            if first is not None:
                send_first(client, first)
            return wf_id
    await start(inp, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                start_signal=signal, start_signal_args=[payload])
    return wf_id


def _attributes(lc: Lifecycle, obj: Obj, inp: Any) -> list[SearchAttributePair[str]]:
    """The search attributes a lifecycle's workflow starts with: its kind, its scope (the
    namespace, or the cluster's name) and its phase (the stored one, or the first)."""
    attrs = [SearchAttributePair(KIND, lc.kind)]
    if lc.scope is not None:
        value = inp.namespace if lc.scope == "namespace" else inp.name
        attrs.append(SearchAttributePair(SCOPE[lc.scope], value))
    if lc.first_phase is not None:
        phase = str((obj.get("status") or {}).get("phase") or "")
        attrs.append(SearchAttributePair(PHASE, phase or lc.first_phase))
    return attrs


def link_input(obj: Obj) -> LinkInput:
    meta = _meta(obj)
    return LinkInput(name=str(meta.get("name")), uid=str(meta.get("uid") or ""),
                     deleting=bool(meta.get("deletionTimestamp")))


def schedule_input(obj: Obj) -> ScheduleInput:
    meta = _meta(obj)
    return ScheduleInput(
        namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""), deleting=bool(meta.get("deletionTimestamp")),
    )


#: how each lifecycle's workflow input is built from the stored object
INPUTS: dict[str, Callable[[Obj], Any]] = {
    "Job": job_input, "Cluster": cluster_input, "Service": service_input,
    "Pipeline": pipeline_input, "Schedule": schedule_input, "Link": link_input,
}


def _ensured(obj: Obj) -> Callable[[Obj], Any] | None:
    """The input converter of ``obj``'s kind if its workflow takes the ``ensure`` signal."""
    lc = BY_KIND.get(str(obj.get("kind")))
    return INPUTS[lc.kind] if lc is not None and lc.ensured else None


async def ensure_lifecycle(client: Client, obj: Obj) -> str:
    """Make sure the object's workflow runs (start it, or attach to the running one)."""
    convert = _ensured(obj)
    if convert is not None:
        inp: Any = convert(obj)
        return await _signal_with_start(client, obj, SIG_ENSURE, inp, inp, True)
    return await _signal_with_start(client, obj, SIG_SPEC, SpecChanged(_generation(obj)))


async def notify_spec_changed(client: Client, obj: Obj) -> None:
    await _signal_with_start(client, obj, SIG_SPEC, SpecChanged(_generation(obj)))


async def notify_deleting(client: Client, obj: Obj) -> None:
    """deletionTimestamp is set: tear down everywhere, then remove the object."""
    convert = _ensured(obj)
    if convert is not None:
        inp: Any = convert(obj)
        await _signal_with_start(client, obj, SIG_ENSURE, inp, inp)
    else:
        await _signal_with_start(client, obj, SIG_DELETE, DeleteRequest(_meta(obj).get("uid", "")))


def _generation(obj: Obj) -> int:
    return int(_meta(obj).get("generation") or 0)


async def signal_scheduler(client: Client, what: str) -> None:
    """One ``rules_changed`` signal; no scheduler yet means no queued job to retry."""
    try:
        await client.get_workflow_handle(SCHEDULER_ID).signal(SIG_RULES, RulesChanged(what))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise


async def _run_op(client: Client, job: Obj, inp: ReplicaOpInput) -> ReplicaOpResult:
    meta = _meta(job)
    op_id = f"op/{meta.get('namespace') or 'default'}/{meta.get('name')}/{uuid.uuid4().hex[:12]}"
    limit = timedelta(seconds=LOGS_BUDGET) if inp.op == "logs" else OP_TIMEOUT
    try:
        result: ReplicaOpResult = await client.execute_workflow(
            WF_REPLICA_OP, inp, id=op_id, task_queue=CONTROL_QUEUE,
            result_type=ReplicaOpResult, execution_timeout=limit,
        )
    except WorkflowFailureError as err:
        raise _op_failure(err, inp, limit) from None
    return result


def _op_failure(err: WorkflowFailureError, inp: ReplicaOpInput, limit: timedelta) -> Exception:
    """What a failed op says to the API: "Workflow execution failed" names nothing."""
    where = ", ".join(inp.clusters)
    if isinstance(err.cause, TimeoutError | TemporalTimeout):
        return OpTimeout(f"cluster(s) {where} did not answer within "
                         f"{limit.total_seconds():g}s (busy, or its skylet is down: "
                         "`skyctl get clusters`; try again)")
    return Transient(f"{inp.op} on cluster(s) {where} failed: {err.cause or err}")


def _names(job: Obj, rank: int | None) -> list[str]:
    meta = _meta(job)
    name, uid = str(meta.get("name")), str(meta.get("uid") or "")
    if rank is not None:
        return [replica_name(name, uid, rank)]
    replicas = int((job.get("spec") or {}).get("replicas", 1))
    return [replica_name(name, uid, r) for r in range(replicas)]


def _raise(error: str) -> None:
    kind, _, message = error.partition(": ")
    cls = {"NotFound": NotFound, "Unsupported": Unsupported, "Permanent": Permanent}.get(
        kind, Transient)
    raise cls(message or error)


#: a job's phases before any of its replicas ran
_STARTING = ("Pending", "Scheduled")


def not_started(job: Obj, clusters: list[str], error: str) -> str | None:
    """The error of a logs read that found no replica of a job that has not started: placed,
    its submit not yet through (or its replicas queued), a cluster does not list them yet, and
    "not found" would read as lost. ``None`` when that is not the case."""
    phase = (job.get("status") or {}).get("phase") or "Pending"
    if not error.startswith("NotFound") or phase not in _STARTING:
        return None
    where = ", ".join(clusters)
    return (f"NotFound: job {_meta(job).get('name')} has not started yet ({phase} on {where}; "
            f"{error.partition(': ')[2] or error})")


async def fetch_logs(client: Client, job: Obj, tail: int | None, rank: int | None) -> str:
    """Output of one replica (``rank``) or of all of them, each under a ``==> name <==`` line."""
    clusters = status_clusters(job)
    if not clusters:
        raise NotFound(f"job {_meta(job).get('name')} has no replicas on any cluster yet")
    names = _names(job, rank)
    res = await _run_op(client, job, ReplicaOpInput("logs", clusters, names, tail,
                                                    timeout=LOGS_TIMEOUT))
    if not res.found:
        _raise(not_started(job, clusters, res.error) or res.error or "NotFound: no replica found")
    if rank is not None:
        return res.found[names[0]]
    return "".join(f"==> {n} <==\n{res.found[n]}" for n in names if n in res.found)


async def exec_in_replica(
    client: Client, job: Obj, command: list[str], rank: int
) -> dict[str, Any]:
    clusters = status_clusters(job)
    if not clusters:
        raise NotFound(f"job {_meta(job).get('name')} has no replicas on any cluster yet")
    res = await _run_op(
        client, job, ReplicaOpInput("exec", clusters, _names(job, rank), command=command)
    )
    if res.exit_code is None:
        _raise(res.error or "NotFound: no replica found")
    return {"exit_code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr}


# ---- schedules: actions on the Temporal Schedule itself ----------------------------------------


#: the Schedule spec's ``overlapPolicy`` values and Temporal's policies
OVERLAP = {
    "Skip": ScheduleOverlapPolicy.SKIP, "BufferOne": ScheduleOverlapPolicy.BUFFER_ONE,
    "BufferAll": ScheduleOverlapPolicy.BUFFER_ALL,
    "CancelOther": ScheduleOverlapPolicy.CANCEL_OTHER,
    "AllowAll": ScheduleOverlapPolicy.ALLOW_ALL,
}


def _schedule_handle(client: Client, obj: Obj) -> Any:
    meta = _meta(obj)
    return client.get_schedule_handle(
        schedule_workflow_id(str(meta.get("namespace") or "default"), str(meta.get("name")))
    )


async def trigger_schedule(client: Client, obj: Obj) -> None:
    """Run the schedule now (even when paused), under its own overlap policy."""
    try:
        await _schedule_handle(client, obj).trigger()
    except RPCError as err:
        raise _schedule_error(err) from None


async def backfill_schedule(client: Client, obj: Obj, start: datetime, end: datetime,
                            overlap: str) -> None:
    """Run every time the schedule would have fired from ``start`` to ``end``, both included
    (``overlap``: a policy name)."""
    try:
        await _schedule_handle(client, obj).backfill(
            ScheduleBackfill(start_at=start, end_at=end, overlap=OVERLAP[overlap])
        )
    except RPCError as err:
        raise _schedule_error(err) from None


def _schedule_error(err: RPCError) -> Exception:
    if err.status == RPCStatusCode.NOT_FOUND:
        return NotFound("the schedule is not set up in Temporal yet (its lifecycle creates it)")
    if err.status == RPCStatusCode.INVALID_ARGUMENT:
        return Permanent(err.message)
    return Transient(err.message)
