"""JobWorkflow (``job/<ns>/<name>``): one job's lifecycle from queueing to removal.

Pending -> Scheduled -> Running -> Succeeded | Failed, or Deleting at any time. The bookkeeping
rules live in :mod:`skyshift.workflows.jobstate`; this module sequences them.

What a job costs the Temporal server (the performance budget of docs/architecture.md), for a
one-replica job that runs to completion on a healthy cluster (lifecycle revision
``SUBMIT_ORDERS`` and started with its first request sent, ``JobInput.enqueued``: what new jobs
get):

* the API's start (the ``ensure`` signal goes only to a workflow already running), delayed, and
  beside it the job's first placement request to the scheduler (:mod:`skyshift.contract.enqueue`);
* the ``placed`` signal, a signal-with-start by the scheduler's batch activity (which also wrote
  status Scheduled), ends the delay -> workflow task 1 sees the start and the placement and
  writes ONE submit order per cluster to etcd with a local activity (a marker;
  :mod:`skyshift.activities.orders`). The cluster's skylet carries it out and writes the job's
  counts (Running) itself; nothing comes back to this workflow for it;
* the replica ends: the skylet's sync counts it, writes the job Succeeded itself (every desired
  replica is; ``lifecycle.convert.all_succeeded``) and sends one ``replicas_changed`` signal
  saying so (``ReplicaReport.finished``; a start is told with it, or a round later for a job
  still running) -> workflow task 2 reaches the same verdict, upserts the search attributes and
  completes. (Without the flag, or after a write of its own since, it writes the verdict with a
  local activity: 13 events.)

So: 2 workflow tasks, no activity task, 2 signals and 1 local activity per job (12 history
events). Runs started without ``enqueued`` (before it, or by a signal-with-start that found no
workflow) enqueue themselves with a local activity in their first workflow task and take the
placement in a second (17 events); those of
``LATE_VISIBILITY`` and older schedule a ``submit_replicas`` activity on ``skylet-<cluster>``
instead of the order, whose result is one more workflow task. A job the scheduler cannot place
within the start delay runs its first task then and waits. The scheduler's batch activity and
workflow task are shared by every job placed in the same round; a running job costs nothing
while nothing changes (the skylet looks per cluster, not per job). Restarts add an order;
failover, scaling and deletion withdraw the orders of the clusters they delete on, then one
delete activity per affected cluster.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.enqueue import enqueued_at_start, job_request
    from skyshift.contract.jobs import (
        DRIFT,
        LATE_VISIBILITY,
        PREEMPTED,
        REJECTED,
        RUNNING,
        SUBMIT_ORDERS,
        ClusterEvent,
        DeleteReplicasInput,
        DequeueRequest,
        EnqueueRequest,
        JobInput,
        JobRef,
        JobState,
        JobStatusPatch,
        JobTemplate,
        Placement,
        ReadJobInput,
        ReadJobResult,
        ReplicaRecord,
        ReplicaReport,
        ReplicaUpdate,
        Requeue,
        SubmitInput,
        SubmitOrder,
        SubmitResult,
        WithdrawOrders,
    )
    from skyshift.contract.names import (
        QUERY_STATE,
        SIG_CLUSTER,
        SIG_PLACED,
        SIG_REPLICAS,
        SIG_REQUEUE,
        WF_JOB,
        job_workflow_id,
        order_name,
        skylet_queue,
    )
    from skyshift.models.job import TERMINAL_PHASES as TERMINAL
    from skyshift.workflows import jobstate as js
    from skyshift.workflows.common import (
        CLUSTER,
        HEARTBEAT_TIMEOUT,
        PHASE,
        SKYLET_RETRY,
        SKYLET_TIMEOUT,
        STORE_RETRY,
        STORE_TIMEOUT,
        current_keywords,
        history_full,
        permanent_cause,
        remove_object,
        upsert,
        wait,
    )
    from skyshift.workflows.lifecycle import StateLifecycle
    from skyshift.workflows.owner import tell_owner

STATUS_FIRST_PATCH = "write-status-before-enqueue"
OWNER_PATCH = "tell-owner-when-ended"
EARLY_PLACEMENT_PATCH = "placement-before-its-enqueue"
SUBMIT_GRACE = timedelta(seconds=30)  # a preempted job waits this long for its submits to end


@workflow.defn(name=WF_JOB)
class JobWorkflow(StateLifecycle[JobInput, JobState]):
    input_type = JobInput

    @workflow.init
    def __init__(self, inp: JobInput) -> None:
        self.inp = inp
        self.t: JobTemplate = inp.template or JobTemplate()
        self.s = inp.state or JobState(
            phase=inp.phase, generation=inp.generation, deleting=inp.deleting
        )
        if inp.state is None and inp.phase not in TERMINAL:
            self.s.replicas = [ReplicaRecord(r) for r in range(self.t.replicas)]
        self.placements: list[Placement] = []
        # placements for an enqueue this run has not made yet (see _enqueue)
        self.early: list[Placement] = []
        self.reports: list[ReplicaReport] = []
        self.events: list[ClusterEvent] = []
        self.results: list[tuple[str, SubmitResult]] = []
        self.submits: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self.tokens = 0
        self.background: set[asyncio.Task[bool]] = set()
        self.fatal: str | None = inp.invalid or None
        self.spec_dirty = False
        self.status_dirty = False
        self.successor: JobInput | None = None
        self.sa: dict[str, str] = {}
        self.preempted: str | None = None  # why, when a higher-priority job evicts this one
        # revision SUBMIT_ORDERS: replicas start from submit orders in etcd (activities.orders)
        self.ordering = inp.revision >= SUBMIT_ORDERS
        self.withdraw: set[str] = set()  # clusters whose orders go before anything else
        self.requeue = False  # the scheduler does not hold this job's request (workers/requeue)
        # a skylet wrote the job Succeeded (ReplicaReport.finished) and nothing was written since
        self.written_succeeded = False
        if enqueued_at_start(inp):  # the starter sent request 1 (contract.enqueue)
            self.s.seq = self.s.awaiting = 1
            self.s.requested_at = inp.created

    # ---- signals and queries ----------------------------------------------------------------

    @workflow.signal(name=SIG_PLACED)
    def placed(self, p: Placement) -> None:
        self.placements.append(p)

    @workflow.signal(name=SIG_REPLICAS)
    def replicas_changed(self, r: ReplicaReport) -> None:
        self.reports.append(r)

    @workflow.signal(name=SIG_CLUSTER)
    def cluster_event(self, e: ClusterEvent) -> None:
        self.events.append(e)

    @workflow.signal(name=SIG_REQUEUE)
    def requeued(self, r: Requeue) -> None:
        self.requeue = True

    @workflow.query(name=QUERY_STATE)
    def state(self) -> JobState:
        return self.s

    # ---- main loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: JobInput) -> str:
        self.sa = current_keywords()
        while True:
            if self.s.deleting:
                return await self._teardown()
            if self.s.phase in TERMINAL:
                return self.s.phase  # finished earlier (e.g. restarted by a spec change)
            if self.spec_dirty:
                await self._reload()
            self._absorb()
            if self.preempted is not None:
                await self._evict()
                continue
            if self.fatal is not None:
                await self._finish("Failed", self.fatal)
                continue
            if (v := js.verdict(self.s, self.t)) is not None:
                await self._finish(*v)
                continue
            await self._act()
            if self._idle() and history_full(self.inp.config.history_limit):
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._idle():
                    workflow.continue_as_new(self._carry())
            await wait(self._has_input, self._timeout())

    def _has_input(self) -> bool:
        return bool(
            self.placements or self.reports or self.events or self.results or self.spec_dirty
            or self.requeue or self.preempted is not None or self.s.deleting
            or self.fatal is not None
            or (js.to_submit(self.s) and any(c not in self.submits for c in js.to_submit(self.s)))
        )

    def _timeout(self) -> timedelta | None:
        now = workflow.now().timestamp()
        due = js.next_restart(self.s)
        if due is not None:
            return timedelta(seconds=max(due - now, 0.001))
        if self.s.awaiting and not self.ordering:
            # Revision SUBMIT_ORDERS waits without a timer (started and cancelled: 2 events per
            # job): the control worker's sweep tells it when the scheduler lost its request
            left = self.s.requested_at + self.inp.config.requeue_after - now
            return timedelta(seconds=max(left, 0.001))
        return None

    def _absorb(self) -> None:
        """Fold every buffered signal and submit result into the state (pure bookkeeping)."""
        now = workflow.now().timestamp()
        for p in self.placements:
            if p.seq > self.s.seq:
                self.early.append(p)
            else:
                js.assign(self.s, p)
        for cluster, result in self.results:
            for u in result.updates:
                self._apply(cluster, u, now)
        for report in self.reports:
            for u in report.updates:
                self._apply(report.cluster, u, now)
            self.written_succeeded = self.written_succeeded or report.finished
        for e in self.events:
            self._cluster_event(e)
        self.placements, self.results, self.reports, self.events = [], [], [], []
        if self.s.phase in ("Pending", "Scheduled") and js.all_started(self.s):
            self.s.phase = RUNNING  # the skylet already wrote Running to etcd

    def _apply(self, cluster: str, u: ReplicaUpdate, now: float) -> None:
        restarts = self.s.restarts
        fatal = js.apply_update(self.s, self.t, self.inp.config, cluster, u, now)
        if fatal is not None and self.fatal is None:
            self.fatal = fatal
        if self.s.restarts != restarts:
            self.status_dirty = True

    def _cluster_event(self, e: ClusterEvent) -> None:
        if e.kind in ("lost", "deleted"):
            if self.s.orders.get(e.cluster):
                self.withdraw.add(e.cluster)
            entry = self.submits.pop(e.cluster, None)
            if entry is not None:
                entry[1].cancel()
            if js.cluster_gone(self.s, self.inp, e.cluster, e.kind):
                self.status_dirty = True
            if e.kind == "deleted":
                self.s.leftovers.pop(e.cluster, None)
        elif e.kind == DRIFT:
            # etcd's placement lost this cluster (overwritten) while replicas run there: this
            # state is where the replicas are, so write it back
            self.status_dirty = True
        elif e.kind == PREEMPTED:
            if js.live_by_cluster(self.s, self.inp) and self.s.phase not in TERMINAL:
                self.preempted = e.message  # a job holding nothing ignores it (a repeat)
        elif e.kind == REJECTED and self.ordering:
            held = any(r.cluster == e.cluster and r.state not in js.FINISHED
                       for r in self.s.replicas)
            if held and self.fatal is None:  # else: a refusal of an order since moved away
                self.fatal = f"cannot run on cluster {e.cluster}: {e.message}"
        elif e.kind == "recovered":
            names = js.leftovers_to_delete(self.s, self.inp, e.cluster)
            if names:
                task = asyncio.create_task(self._delete(e.cluster, names))
                self.background.add(task)
                task.add_done_callback(self.background.discard)

    async def _act(self) -> None:
        now = workflow.now().timestamp()
        if self.withdraw:
            await self._withdraw(sorted(self.withdraw))
        js.due_restarts(self.s, now)
        stale = self.s.awaiting and (
            self.requeue
            or (not self.ordering and now - self.s.requested_at >= self.inp.config.requeue_after))
        self.requeue = False
        if js.unplaced(self.s) and (not self.s.awaiting or stale):
            # Status first: the placement the scheduler writes must come after ours, or ours
            # (from before the placement) overwrites it and the job shows no placement at all.
            if self.status_dirty and workflow.patched(STATUS_FIRST_PATCH):
                await self._write_dirty()
            await self._enqueue(now)
        started = False
        if self.ordering:
            started = await self._order_all()
        for cluster, recs in js.to_submit(self.s).items():
            if cluster not in self.submits:
                js.submitted(self.s, cluster, [r.rank for r in recs])
                self.tokens += 1
                task = asyncio.create_task(self._submit(cluster, recs, self.tokens))
                self.submits[cluster] = (self.tokens, task)
                started = True
        if self.status_dirty:
            await self._write_dirty()
        # A submit's result wakes this workflow again soon, with the phase it leads to
        # (Running, or Scheduled while the cluster queues it): the search attributes wait for
        # it rather than show Scheduled for the moment in between. A visibility update costs
        # the Temporal server about as much as an activity (measured), and this was one of
        # two per job.
        if not (started and self.inp.revision >= LATE_VISIBILITY):
            self._search_attributes()

    async def _write_dirty(self) -> None:
        self.status_dirty = False
        await self._write(JobStatusPatch(
            self.inp.namespace, self.inp.name, self.inp.uid, message=self.s.message,
            restarts=self.s.restarts, placement=js.placement_of(self.s),
        ))

    def _search_attributes(self) -> None:
        values = [(PHASE, self.s.phase)]
        if cluster := js.primary_cluster(self.s):
            values.append((CLUSTER, cluster))
        upsert(values, self.sa)

    # ---- activities -------------------------------------------------------------------------

    async def _enqueue(self, now: float) -> None:
        self.s.seq += 1
        self.s.awaiting, self.s.requested_at = self.s.seq, now
        # A workflow task that timed out after its enqueue_job local activity ran leaves no
        # marker: the scheduler has the request and may have answered before the task is
        # retried. Its placement then arrives before this enqueue; sending the request again
        # would have the scheduler place the job twice (or drop it as a duplicate while the
        # job waits requeue_after). The placement answers this enqueue: take it.
        answer = [p for p in self.early if p.seq == self.s.seq]
        if answer and workflow.patched(EARLY_PLACEMENT_PATCH):
            self.early = [p for p in self.early if p.seq > self.s.seq]
            self.placements.extend(answer)
            return
        req = job_request(self.inp, self.t, len(js.unplaced(self.s)), now)
        current = js.placement_of(self.s)
        wf_id = job_workflow_id(self.inp.namespace, self.inp.name)
        await workflow.execute_local_activity(
            act.ENQUEUE_JOB, EnqueueRequest(wf_id, self.s.seq, req, current),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        )

    async def _order_all(self) -> bool:
        """Write a submit order for each cluster with replicas to start (one local activity
        each, in parallel); True when there was any."""
        orders = js.to_submit(self.s)
        for cluster, recs in orders.items():
            js.submitted(self.s, cluster, [r.rank for r in recs])
        await asyncio.gather(*(self._order(c, recs) for c, recs in orders.items()))
        return bool(orders)

    async def _order(self, cluster: str, recs: list[ReplicaRecord]) -> None:
        self.s.ordered += 1
        self.s.orders[cluster] = self.s.orders.get(cluster, 0) + 1
        specs = [js.replica_spec(self.inp, self.t, r) for r in recs]
        ref = JobRef(self.inp.namespace, self.inp.name, self.inp.uid)
        order = SubmitOrder(order_name(self.inp.uid, self.s.ordered),
                            SubmitInput(ref, cluster, specs))
        try:
            await workflow.execute_local_activity(
                act.POST_SUBMIT_ORDER, order, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
        except (ActivityError, ApplicationError) as err:  # refused by the checks of trust.py
            why = permanent_cause(err)  # (a local activity's failure comes as its cause)
            if why is None:
                raise
            if self.fatal is None:
                self.fatal = f"cannot run on cluster {cluster}: {why}"

    async def _withdraw(self, clusters: list[str]) -> None:
        """Withdraw the orders not carried out yet on ``clusters`` (before replicas there are
        deleted: the skylet never carries one out after that delete)."""
        clusters = [c for c in clusters if self.s.orders.get(c)]
        self.withdraw -= set(clusters)
        for c in clusters:
            del self.s.orders[c]
        await asyncio.gather(*(workflow.execute_local_activity(
            act.WITHDRAW_SUBMIT_ORDERS, WithdrawOrders(c, self.inp.uid),
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
        ) for c in clusters))

    async def _submit(self, cluster: str, recs: list[ReplicaRecord], token: int) -> None:
        specs = [js.replica_spec(self.inp, self.t, r) for r in recs]
        ref = JobRef(self.inp.namespace, self.inp.name, self.inp.uid)
        try:
            result = await workflow.execute_activity(
                act.SUBMIT_REPLICAS, SubmitInput(ref, cluster, specs), result_type=SubmitResult,
                task_queue=skylet_queue(cluster), start_to_close_timeout=SKYLET_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SKYLET_RETRY,
            )
            self.results.append((cluster, result))
        except ActivityError as err:
            why = permanent_cause(err)
            if why is not None and self.fatal is None:
                self.fatal = f"cannot run on cluster {cluster}: {why}"
        except asyncio.CancelledError:
            pass  # the cluster was lost: its replicas are being placed elsewhere
        finally:
            if self.submits.get(cluster, (0, None))[0] == token:
                del self.submits[cluster]

    async def _delete(self, cluster: str, names: list[str], uid: str = "") -> bool:
        try:
            await workflow.execute_activity(
                act.DELETE_REPLICAS, DeleteReplicasInput(cluster, uid, names),
                task_queue=skylet_queue(cluster), start_to_close_timeout=SKYLET_TIMEOUT,
                schedule_to_close_timeout=timedelta(seconds=self.inp.config.teardown_timeout),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SKYLET_RETRY,
            )
            return True
        except ActivityError as err:
            workflow.logger.warning("delete on %s failed: %s", cluster, err.cause or err)
            return False

    async def _write(self, patch: JobStatusPatch) -> None:
        self.written_succeeded = False  # what the skylet wrote may be written over
        if patch.observed_generation is None and self.s.generation:
            patch.observed_generation = self.s.generation
        await workflow.execute_local_activity(
            act.WRITE_JOB_STATUS, patch, start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
        )

    async def _reload(self) -> None:
        got = await self._read_stored(
            act.READ_JOB, ReadJobInput(self.inp.namespace, self.inp.name, self.inp.uid),
            ReadJobResult,
        )
        if got is None:
            return
        if got.invalid or got.template is None:
            self.fatal = got.invalid or "invalid job spec"
            return
        self.t, self.s.generation = got.template, got.generation
        doomed = js.scale(self.s, self.inp, self.t.replicas)
        if doomed and self.s.orders:
            # an order may hold doomed ranks: withdrawn, and what else it held ordered again
            await self._withdraw(sorted(doomed))
            js.order_again(self.s, set(doomed))
        await asyncio.gather(*(self._delete(c, names) for c, names in doomed.items()))
        await self._write(JobStatusPatch(
            self.inp.namespace, self.inp.name, self.inp.uid, observed_generation=got.generation,
            placement=js.placement_of(self.s),
        ))

    # ---- preemption --------------------------------------------------------------------------

    async def _evict(self) -> None:
        """Preempted: delete every replica (after in-flight submits end, so none appears
        behind the delete), record why, and go back to the queue. Each step is a command in
        this history, so a worker that dies mid-way resumes where it was."""
        why, self.preempted = self.preempted or "", None
        try:
            await workflow.wait_condition(lambda: not self.submits, timeout=SUBMIT_GRACE)
        except TimeoutError:
            for _, task in list(self.submits.values()):
                task.cancel()
            await workflow.wait_condition(lambda: not self.submits)
        await self._withdraw(sorted(self.s.orders))
        live = js.live_by_cluster(self.s, self.inp)
        done = await asyncio.gather(*(self._delete(c, names) for c, names in live.items()))
        for (cluster, names), ok in zip(live.items(), done, strict=True):
            if not ok:  # the cluster is away: deleted when it returns
                self.s.leftovers.setdefault(cluster, []).extend(names)
        js.evicted(self.s, why)
        await self._write(JobStatusPatch(
            self.inp.namespace, self.inp.name, self.inp.uid, phase=self.s.phase,
            message=why, placement={}, replica_status={}, preempted=why,
        ))
        self._search_attributes()

    # ---- endings ----------------------------------------------------------------------------

    async def _finish(self, phase: str, message: str) -> None:
        if phase == "Failed":
            live = js.live_by_cluster(self.s, self.inp)
            for _, task in list(self.submits.values()):
                task.cancel()
            await self._withdraw(sorted(self.s.orders))
            await asyncio.gather(*(self._delete(c, names) for c, names in live.items()))
        self.s.phase, self.s.message = phase, message
        # The skylet that counted the last replica Succeeded wrote this phase, message and
        # completion time with the counts it reported: the same verdict needs no write of its
        # own (a marker fewer per job, bench/temporal_cost.py)
        if not (phase == "Succeeded" and self.written_succeeded and not self.status_dirty):
            await self._write(JobStatusPatch(
                self.inp.namespace, self.inp.name, self.inp.uid, phase=phase, message=message,
                restarts=self.s.restarts, placement=js.placement_of(self.s),
                replica_status=js.counts_by_cluster(self.s), finished=True,
            ))
        self._search_attributes()
        self.fatal = None
        await self._tell_owner(phase)
        await workflow.wait_condition(workflow.all_handlers_finished)

    async def _tell_owner(self, phase: str) -> None:
        if self.inp.owner and workflow.patched(OWNER_PATCH):
            await tell_owner(self.inp.owner, self.inp.name, phase)

    async def _teardown(self) -> str:
        """Delete every replica everywhere, then remove the object (finalizer), then end."""
        if self.s.awaiting:
            await workflow.execute_local_activity(
                act.DEQUEUE_JOB, DequeueRequest(f"{self.inp.namespace}/{self.inp.name}",
                                              self.inp.uid),
                start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
            )
        for _, task in list(self.submits.values()):
            task.cancel()
        await workflow.wait_condition(lambda: not self.submits)
        await self._withdraw(sorted(self.s.orders))
        clusters = {r.cluster for r in self.s.replicas if r.cluster}
        clusters |= set(self.s.leftovers) | set(self.inp.clusters)
        upsert([(PHASE, "Deleting")], self.sa)
        await asyncio.gather(
            *(self._delete(c, [], self.inp.uid) for c in sorted(clusters))
        )
        await remove_object("jobs", self.inp.name, self.inp.uid, self.inp.namespace)
        if self.s.phase not in TERMINAL:
            await self._tell_owner("Deleted")
        return await self._deleted()

    # ---- continue-as-new --------------------------------------------------------------------

    def _idle(self) -> bool:
        return not (
            self.submits or self.background or self.placements or self.reports or self.events
            or self.withdraw
            or self.results or self.spec_dirty or self.s.deleting or self.successor or self.fatal
            or self.requeue
            or self.preempted is not None
        )

    def _carry(self) -> JobInput:
        inp = self.inp
        return JobInput(
            namespace=inp.namespace, name=inp.name, uid=inp.uid, generation=self.s.generation,
            created=inp.created, template=self.t, phase=self.s.phase, clusters=inp.clusters,
            state=self.s, config=inp.config, owner=inp.owner, revision=inp.revision,
        )
