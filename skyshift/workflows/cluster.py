"""ClusterWorkflow (``cluster/<name>``, "the Skylet"): attach, keep in sync, tear down.

Attaching is the first round of the sync activity on ``skylet-<name>``: a config the adapter
rejects (compat Permanent) ends that activity with phase Error and the adapter's message, and the
workflow waits for a spec change or deletion instead of retrying. Otherwise the sync activity
(:mod:`skyshift.activities.sync`) runs for minutes at a time, heartbeating; it returns when the
phase changes (recorded here in the search attributes) and is simply started again. A skylet that
dies is noticed through the heartbeat timeout and the activity is retried on the next poller.

Deletion cancels the sync, runs the teardown activity (delete every SkyShift replica, tell the
jobs that had some so they move elsewhere; a cluster unreachable for the sync's ``lost_after`` is
given up on, see :mod:`skyshift.activities.teardown`, and the workflow's result then says that
replicas may be left on it), falls back to the SkyShiftCluster search attribute
to tell running jobs when the cluster cannot be reached, and finally removes the Cluster object.

A Cluster with ``spec.provision`` is first provisioned through SkyPilot, and scaled and torn
down with it: :mod:`skyshift.workflows.cluster_provision`.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.jobs import (
        UNREACHABLE,
        ClusterEvent,
        ClusterInput,
        ClusterJobsInput,
        ClusterStatusPatch,
        SyncInput,
        SyncResult,
        TeardownInput,
        TeardownResult,
    )
    from skyshift.contract.names import (
        QUERY_PHASE,
        SIG_SCALE,
        WF_CLUSTER,
        skylet_queue,
    )
    from skyshift.contract.provision import ProvisionState, ScaleRequest
    from skyshift.workflows.cluster_provision import PROVISION_PATCH, ProvisionedLifecycle
    from skyshift.workflows.common import (
        CLUSTER,
        HEARTBEAT_TIMEOUT,
        KIND,
        PHASE,
        SKYLET_RETRY,
        STORE_RETRY,
        STORE_TIMEOUT,
        current_keywords,
        history_full,
        permanent_cause,
        remove_object,
        upsert,
        wait,
    )
    from skyshift.workflows.lifecycle import Deletable

TEARDOWN_TIMEOUT = timedelta(seconds=60)


@workflow.defn(name=WF_CLUSTER)
class ClusterWorkflow(ProvisionedLifecycle, Deletable[ClusterInput]):
    @workflow.init
    def __init__(self, inp: ClusterInput) -> None:
        self.inp = inp
        self.phase = inp.phase
        self.lost = list(inp.lost_jobs)
        self.deleting = inp.deleting
        self.spec_dirty = False
        self.sa: dict[str, str] = {}
        self.scale_to = 0  # nodes the scheduler asked a provisioned cluster to grow to

    @workflow.signal(name=SIG_SCALE)
    def scale(self, r: ScaleRequest) -> None:
        self.scale_to = max(self.scale_to, r.nodes)

    @workflow.query(name=QUERY_PHASE)
    def current_phase(self) -> str:
        return self.phase

    @workflow.run
    async def run(self, inp: ClusterInput) -> str:
        self.sa = current_keywords()
        self.spec_dirty = False  # the API's ensure at creation is not a change of spec
        upsert([(KIND, "Cluster"), (CLUSTER, inp.name), (PHASE, self.phase)], self.sa)
        if inp.provision is not None and workflow.patched(PROVISION_PATCH):
            return await self._run_provisioned(inp, inp.provision)
        while not self.deleting:
            result = await self._sync()
            if result is None:
                continue  # cancelled for deletion
            await self._record(result)
            if result.permanent:
                continue
            if history_full(inp.history_limit) and not self.deleting:
                await self._continue_as_new(ClusterInput(
                    inp.name, inp.uid, self.phase, False, self.lost, inp.heartbeat_timeout,
                    inp.sync_duration, inp.history_limit,
                ))
        return await self._teardown()

    async def _run_provisioned(self, inp: ClusterInput, st: ProvisionState) -> str:
        carry = await self._provisioned(st)
        if carry is not None:
            await self._continue_as_new(ClusterInput(
                inp.name, inp.uid, self.phase, False, self.lost, inp.heartbeat_timeout,
                inp.sync_duration, inp.history_limit, carry,
            ))
        return await self._teardown(st)

    def _start_sync(self) -> asyncio.Task[SyncResult]:
        inp = self.inp
        return asyncio.create_task(workflow.execute_activity(
            act.SYNC_CLUSTER,
            SyncInput(inp.name, inp.uid, self.phase, self.lost, inp.sync_duration),
            result_type=SyncResult, task_queue=skylet_queue(inp.name),
            start_to_close_timeout=timedelta(seconds=inp.sync_duration + 60),
            heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout),
            retry_policy=SKYLET_RETRY,
            # deletion waits for the sync to stop, so teardown never races a sync round
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        ))

    async def _sync_done(self, task: asyncio.Task[SyncResult]) -> bool:
        """A provisioned cluster's sync round ended: record it; True when history is full."""
        try:
            result = task.result()
        except ActivityError as err:
            result = await self._sync_failed(err, "reach")
        await self._record(result)
        return history_full(self.inp.history_limit) and not self.deleting

    async def _sync(self) -> SyncResult | None:
        task = self._start_sync()
        await workflow.wait_condition(lambda: task.done() or self.deleting)
        if not task.done():
            task.cancel()
            with contextlib.suppress(ActivityError, asyncio.CancelledError):
                await task
            return None
        try:
            result: SyncResult = task.result()
            return result
        except ActivityError as err:
            return await self._sync_failed(err, "attach")

    async def _record(self, result: SyncResult) -> None:
        """A sync round's outcome: the phase (in the search attributes too) and the jobs told
        "lost"; after a permanent error, wait for a spec change or deletion."""
        self.phase, self.lost = result.phase, result.lost_jobs
        upsert([(PHASE, self.phase)], self.sa)
        if result.permanent:
            await wait(lambda: self.spec_dirty or self.deleting, None)
            self.spec_dirty = False

    async def _sync_failed(self, err: ActivityError, doing: str) -> SyncResult:
        """The sync activity failed for good: phase Error with why, until the spec changes."""
        why = permanent_cause(err) or str(err.cause or err)
        msg = f"cannot {doing} cluster {self.inp.name}: {why}"
        await workflow.execute_local_activity(
            act.WRITE_CLUSTER_STATUS, ClusterStatusPatch(self.inp.name, self.inp.uid, "Error", msg),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        return SyncResult("Error", msg, self.lost, permanent=True)

    async def _teardown(self, provisioned: ProvisionState | None = None) -> str:
        inp = self.inp
        upsert([(PHASE, "Deleting")], self.sa)
        told: list[str] = []
        said = ""  # the teardown's warning when it gave up on an unreachable cluster
        if provisioned is not None and not provisioned.groups:
            # nothing was UP: no replicas to delete, only names a launch may have started
            await self._terminate(provisioned)
            await remove_object("clusters", inp.name, inp.uid)
            return "Deleted"
        try:
            result: TeardownResult = await workflow.execute_activity(
                act.TEARDOWN_CLUSTER, TeardownInput(inp.name), result_type=TeardownResult,
                task_queue=skylet_queue(inp.name), schedule_to_close_timeout=TEARDOWN_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SKYLET_RETRY,
            )
            told = result.jobs
            if result.message.startswith(UNREACHABLE):
                said = result.message
                workflow.logger.warning("%s", said)
        except ActivityError as err:
            workflow.logger.warning("teardown of cluster %s failed: %s", inp.name, err.cause)
        if provisioned is not None:
            await self._terminate(provisioned)
        event = ClusterEvent(inp.name, "deleted", f"cluster {inp.name} was deleted")
        await workflow.execute_local_activity(
            act.NOTIFY_CLUSTER_JOBS, ClusterJobsInput(inp.name, event, told),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        await remove_object("clusters", inp.name, inp.uid)
        return f"Deleted; {said}" if said else "Deleted"
