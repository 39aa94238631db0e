"""ClusterWorkflow's states for a Cluster with ``spec.provision``: Provisioning -> Ready
(-> Scaling -> Ready)* -> Terminating -> gone, or Provisioning -> Failed.

Provisioning launches node group 0 (``min`` nodes) with the ``provision_cluster`` activity on the
control queue: Capacity and Transient errors are retried by Temporal with backoff
(``attempts_per_infra`` attempts), then the workflow tears down what the attempt left and fails
over to the next candidate infra; a Permanent error ends the Cluster Failed with the
provisioner's message at once. Once a group is UP, its name is in ``status.provision``, the
skylet builds the ``skypilot`` manager over it, and the ordinary sync loop runs (it writes
Ready). A ``scale`` signal (from the scheduler) adds a group up to ``max`` nodes; with
``idleMinutes``, a cluster without SkyShift replicas for that long loses its added groups, and
when only the first is left and it idles as long again, the Cluster is torn down and removed
(SkyPilot's autodown). With ``min: 0`` nothing is launched at first: the Cluster is Ready with no
nodes (the skylet's manager over no SkyPilot cluster), the first ``scale`` launches group 0, and
idling tears every group down, leaving it Ready at zero again. Deletion at any point tears
down every group name ever tried.

This module holds only workflow code (deterministic; the activities do the I/O).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.jobs import ClusterInput, ClusterStatusPatch
    from skyshift.contract.provision import (
        DownInput,
        LaunchInput,
        LaunchResult,
        ProvisionState,
        UsageInput,
        UsageResult,
        sky_name,
    )
    from skyshift.workflows.common import (
        HEARTBEAT_TIMEOUT,
        NON_RETRYABLE,
        PHASE,
        STORE_RETRY,
        STORE_TIMEOUT,
        permanent_cause,
        upsert,
        wait,
    )

PROVISION_PATCH = "cluster-provision-v1"
DOWN_TIMEOUT = timedelta(minutes=30)
#: teardown is retried until it succeeds, whatever the error (status.provision.lastError says
#: why meanwhile): giving up would leave the SkyPilot cluster running with nothing tracking it
DOWN_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2),
                         maximum_interval=timedelta(minutes=5))
AUTODOWN = datetime(1, 1, 1)  # _idle's answer when the whole cluster is to go


class ProvisionedLifecycle:
    """Mixed into ClusterWorkflow: the state it uses is set up in its ``__init__``."""

    inp: ClusterInput
    phase: str
    deleting: bool
    scale_to: int
    sa: dict[str, str]

    # ---- small steps ---------------------------------------------------------------------------

    async def _set_phase(self, phase: str, message: str) -> None:
        self.phase = phase
        upsert([(PHASE, phase)], self.sa)
        await workflow.execute_local_activity(
            act.WRITE_CLUSTER_STATUS,
            ClusterStatusPatch(self.inp.name, self.inp.uid, phase, message),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )

    async def _down(self, st: ProvisionState, names: list[str], phase: str) -> None:
        """Tear down ``names``, retried until it succeeds (DOWN_RETRY)."""
        if not names:
            return
        stays = {n: k for n, k in st.groups.items() if n not in names}
        await workflow.execute_activity(
            act.UNPROVISION_CLUSTER, DownInput(self.inp.name, self.inp.uid, names, phase, stays),
            result_type=int, start_to_close_timeout=DOWN_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=DOWN_RETRY,
        )
        st.groups = stays

    async def _launch(self, st: ProvisionState, group: int, nodes: int, phase: str,
                      failover: bool) -> str | None:
        """Launch group ``group``; None once it is UP, else why not ("" when deleted)."""
        plan, name = st.plan, sky_name(self.inp.name, self.inp.uid, group)
        st.tried = max(st.tried, group + 1)
        while st.infra_index < len(plan.infras):
            task = asyncio.create_task(workflow.execute_activity(
                act.PROVISION_CLUSTER,
                LaunchInput(self.inp.name, self.inp.uid, name, st.infra, nodes, plan.cpus,
                            plan.memory_mb, dict(plan.accelerators), plan.timeout_s,
                            st.attempts, dict(st.groups), phase),
                result_type=LaunchResult,
                start_to_close_timeout=timedelta(seconds=plan.timeout_s + 120),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=plan.backoff_s), backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=max(plan.backoff_s, 60)),
                    maximum_attempts=plan.attempts_per_infra,
                    non_retryable_error_types=NON_RETRYABLE,
                ),
                # a launch in flight finishes before a teardown starts: nothing is leaked
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            ))
            launching = task
            await workflow.wait_condition(lambda: launching.done() or self.deleting)  # noqa: B023
            if not task.done():
                task.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await task
                return ""
            try:
                result = task.result()
            except ActivityError as err:
                why = permanent_cause(err)
                if why is not None:
                    st.last_error = why
                    return why
                st.attempts += plan.attempts_per_infra
                st.last_error = str(getattr(err.cause, "message", None) or err.cause or err)
                await self._down(st, [name], "")  # what the attempts left on this infra
                if not failover:
                    return f"cannot add nodes on {st.infra}: {st.last_error}"
                st.infra_index += 1
                continue
            st.attempts += result.attempts
            st.groups[name] = result.nodes
            return None
        tried = ", ".join(plan.infras)
        return f"no capacity on {tried} after {st.attempts} attempts: {st.last_error}"

    # ---- the lifecycle ---------------------------------------------------------------------------

    async def _provisioned(self, st: ProvisionState) -> ProvisionState | None:
        """Provision when nothing is UP yet; then serve scaling and idle teardown while the sync
        loop runs. Returns the state to continue-as-new with, or None when it is time to tear
        down (deleted, failed and then deleted, or idle)."""
        if self.phase == "Failed" and not st.groups:
            await wait(lambda: self.deleting, None)
            return None
        if not st.groups and st.plan.min_nodes:  # min 0: Ready with no nodes, grown on demand
            await self._set_phase("Provisioning", f"provisioning on {st.infra}")
            why = await self._launch(st, 0, st.plan.min_nodes, "Provisioning", failover=True)
            if why is not None:
                if why:
                    await self._set_phase("Failed", why)
                    await wait(lambda: self.deleting, None)
                return None
        return await self._serve(st)

    async def _serve(self, st: ProvisionState) -> ProvisionState | None:
        sync: asyncio.Task[Any] | None = None
        idle = st.plan.idle_s
        check = timedelta(seconds=min(max(idle / 4, 1), 300)) if idle else None
        idle_since: datetime | None = None
        try:
            while not self.deleting:
                if sync is None or sync.done():
                    if sync is not None and await self._sync_done(sync):
                        return st  # history full: continue-as-new
                    sync = self._start_sync()
                running = sync
                await wait(lambda: (self.deleting or running.done()  # noqa: B023
                                    or self.scale_to > st.nodes), check)
                if self.deleting:
                    break
                if self.scale_to > st.nodes:
                    await self._scale(st)
                    idle_since = None  # growing is not idling: the clock starts again
                elif idle:
                    idle_since = await self._idle(st, idle_since)
                    if idle_since == AUTODOWN:
                        return None
        finally:
            if sync is not None and not sync.done():
                sync.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await sync
        return None

    async def _scale(self, st: ProvisionState) -> None:
        want = min(self.scale_to, st.plan.max_nodes)
        self.scale_to = 0
        if want <= st.nodes:
            return
        prev = self.phase
        self.phase = "Scaling"
        upsert([(PHASE, "Scaling")], self.sa)
        why = await self._launch(st, st.tried, want - st.nodes, "Scaling", failover=False)
        if why == "":
            return  # deleted meanwhile
        done = f"{st.nodes} nodes in {len(st.groups)} SkyPilot clusters"
        await self._set_phase("Ready" if prev in ("Ready", "Scaling", "Init") else prev,
                              done if why is None else why)

    async def _idle(self, st: ProvisionState, since: datetime | None) -> datetime | None:
        """Tear down after ``idle_minutes`` without replicas: the added groups first, then the
        whole cluster (one that scales from zero: every group, and it stays, with no nodes).
        Returns the new idle start (AUTODOWN: remove the cluster)."""
        if not st.plan.min_nodes and not st.groups:
            return None  # at zero already: nothing to idle down
        usage: UsageResult = await workflow.execute_local_activity(
            act.CLUSTER_USAGE, UsageInput(self.inp.name), result_type=UsageResult,
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )
        now = workflow.now()
        if usage.replicas:
            return None
        if since is None:
            return now
        if now - since < timedelta(seconds=st.plan.idle_s):
            return since
        extra = list(st.groups)[1 if st.plan.min_nodes else 0:]
        if not extra:
            return AUTODOWN
        self.phase = "Scaling"
        upsert([(PHASE, "Scaling")], self.sa)
        await self._down(st, extra, "Scaling")
        zero = "" if st.groups else ", scaled to zero"
        await self._set_phase("Ready", f"idle for {st.plan.idle_minutes} min: "
                                       f"{len(extra)} SkyPilot clusters torn down{zero}")
        return now

    async def _terminate(self, st: ProvisionState) -> None:
        """Every group name ever tried, launched or not (a retried launch may have started it)."""
        upsert([(PHASE, "Terminating")], self.sa)
        names = [sky_name(self.inp.name, self.inp.uid, k) for k in range(st.tried)]
        await self._down(st, names, "Terminating")

    # implemented by ClusterWorkflow
    def _start_sync(self) -> asyncio.Task[Any]:
        raise NotImplementedError

    async def _sync_done(self, task: asyncio.Task[Any]) -> bool:
        raise NotImplementedError
