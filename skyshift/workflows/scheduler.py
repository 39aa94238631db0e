"""SchedulerWorkflow (id ``scheduler``): the one queue of jobs waiting for a placement.

Jobs arrive by signal-with-start (``enqueue``), so the scheduler exists as soon as one job does.
Each round takes the queued jobs that have not been tried against the current capacity, highest
priority first then oldest, and hands them all to ONE ``place_batch`` local activity (a marker
in this history, no activity task and no workflow task for its result), which places them
against the clusters' allocatable capacity minus the reservations held here, writes their status
and signals each placed job. A job that fits nowhere stays queued (its reasons are in its status,
never Failed) and is tried again only when capacity is freed (a cluster's ``capacity`` signal or
an expired reservation) or the rules change (``rules_changed``: a FilterPolicy or a cluster's
labels), so an idle queue costs nothing.

Reservations: every placement is held here until the cluster reports (``capacity`` signal with
``seen_uids``) that its allocatable now accounts for that job, or until ``reservation_ttl``; that
is what keeps a burst of concurrent submissions from overcommitting a cluster between two of its
capacity reports. The skylet writes the allocatable before it reports the jobs seen, so a round
in between subtracts them twice; a job left pending by such a round is tried again when one of
the reservations it was judged against is confirmed (released without the capacity signal's
``freed``), also when the confirmation arrives while that round is still out. A report can
also come before the batch that placed the job has returned (its replicas started while the
batch was still signalling other jobs); it is applied to the reservations that batch makes.
State is one dataclass, carried over continue-as-new.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.jobs import (
        CapacityChanged,
        DequeueRequest,
        EnqueueBatch,
        EnqueueRequest,
        PlaceBatchInput,
        PlaceBatchResult,
        QueueEntry,
        QueueView,
        Reservation,
        RulesChanged,
        SchedulerInput,
        SchedulerState,
    )
    from skyshift.contract.names import (
        QUERY_DEPTH,
        QUERY_QUEUE,
        QUERY_STATE,
        SIG_CAPACITY,
        SIG_DEQUEUE,
        SIG_ENQUEUE,
        SIG_ENQUEUE_MANY,
        SIG_RULES,
        WF_SCHEDULER,
    )
    from skyshift.workflows.common import (
        HEARTBEAT_TIMEOUT,
        KIND,
        STORE_RETRY,
        current_keywords,
        history_full,
        upsert,
        wait,
    )

PLACE_TIMEOUT = timedelta(seconds=120)
RETRY_DELAY = 2.0  # seconds before a job whose placement could not be delivered is tried again
RECHECK_PATCH = "retry-pending-after-confirmed-reservation"
EARLY_PATCH = "confirm-reservations-reported-before-placed"
MIDBATCH_PATCH = "retry-pending-after-reservation-confirmed-mid-batch"
LOCAL_PLACE_PATCH = "place-batch-as-local-activity"
REQUEUE_PATCH = "release-reservations-of-a-job-queued-again"
PLACED_BEHIND_PATCH = "retry-pending-after-reservation-of-same-round-confirmed"


def order(e: QueueEntry) -> tuple[int, float, str]:
    r = e.req.request
    return (-r.priority, r.created, r.key)


@workflow.defn(name=WF_SCHEDULER)
class SchedulerWorkflow:
    @workflow.init
    def __init__(self, inp: SchedulerInput) -> None:
        st = inp.state or SchedulerState()
        self.cfg = inp.config
        self.queue: dict[str, QueueEntry] = {e.req.request.key: e for e in st.queue}
        self.reservations: list[Reservation] = list(st.reservations)
        self.epoch = st.epoch
        self.placing: set[str] = set()  # uids of the jobs in the batch being placed
        self.early: list[CapacityChanged] = []  # their replicas, reported before the batch ended

    @workflow.signal(name=SIG_ENQUEUE)
    def enqueue(self, req: EnqueueRequest) -> None:
        key = req.request.key
        old = self.queue.get(key)
        if old and old.req.request.uid == req.request.uid and old.req.seq >= req.seq:
            return  # a duplicate (retried enqueue)
        self.queue[key] = QueueEntry(req, last_message=old.last_message if old else "")
        if not req.current and any(r.uid == req.request.uid for r in self.reservations) and (
            workflow.patched(REQUEUE_PATCH)
        ):
            # queued again holding nothing (preempted, or its cluster lost): what was reserved
            # for it is gone, and a job waiting for that capacity must not wait for the TTL
            self._release(lambda r: r.uid == req.request.uid)

    @workflow.signal(name=SIG_ENQUEUE_MANY)
    def enqueue_many(self, batch: EnqueueBatch) -> None:
        """Requests that travelled together: one signal event for all of them."""
        for req in batch.requests:
            self.enqueue(req)

    @workflow.signal(name=SIG_DEQUEUE)
    def dequeue(self, req: DequeueRequest) -> None:
        entry = self.queue.get(req.key)
        if entry and (not req.uid or entry.req.request.uid == req.uid):
            del self.queue[req.key]
        self._release(lambda r: r.key == req.key and (not req.uid or r.uid == req.uid))

    @workflow.signal(name=SIG_CAPACITY)
    def capacity(self, c: CapacityChanged) -> None:
        if early := [u for u in c.seen_uids if u in self.placing]:
            # placed by the batch in flight: their reservations are made when it returns
            self.early.append(CapacityChanged(
                c.cluster, early, seen_counts={u: n for u, n in c.seen_counts.items()
                                               if u in self.placing}))
            c = CapacityChanged(c.cluster, [u for u in c.seen_uids if u not in self.placing],
                                c.freed, {u: n for u, n in c.seen_counts.items()
                                          if u not in self.placing})
        # The skylet writes the allocatable before it sends this signal: a round in between
        # subtracted these jobs twice and may have left a job pending that fits. A round still
        # out (a batch in flight) may be doing that right now: its pending jobs get tried again.
        confirmed, counted_twice = self._confirm(c)
        if c.freed or (counted_twice and workflow.patched(RECHECK_PATCH)) or (
            confirmed and self.placing and workflow.patched(MIDBATCH_PATCH)
        ):
            self.epoch += 1

    def _confirm(self, c: CapacityChanged) -> tuple[bool, bool]:
        """Drop the reservations the cluster now accounts: (any dropped or reduced, one of
        them was subtracted by a round that left a job pending)."""
        seen = set(c.seen_uids)
        confirmed = [r for r in self.reservations if r.cluster == c.cluster and r.uid in seen]
        if c.seen_counts:
            # only as many replicas as appeared are accounted: keep holding the others (a
            # reservation released while half a job's replicas were listed let the next round
            # place another job onto capacity those replicas were about to take)
            left = dict(c.seen_counts)
            for r in confirmed:
                took = min(r.count, left.get(r.uid, 0))
                r.count -= took
                left[r.uid] = left.get(r.uid, 0) - took
            self._release(lambda r: r.count <= 0, bump=False)
        else:
            self._release(lambda r: r.cluster == c.cluster and r.uid in seen, bump=False)
        return bool(confirmed), any(r.pending_behind for r in confirmed)

    @workflow.signal(name=SIG_RULES)
    def rules_changed(self, r: RulesChanged) -> None:
        """Placement rules changed (policies, cluster labels): retry every queued job now."""
        if self.queue:
            self.epoch += 1

    @workflow.query(name=QUERY_STATE)
    def state(self) -> SchedulerState:
        return SchedulerState(list(self.queue.values()), list(self.reservations), self.epoch)

    @workflow.query(name=QUERY_QUEUE)
    def queued(self) -> QueueView:
        """For the control worker's requeue sweep (workers/requeue.py)."""
        return QueueView(workflow.info().first_execution_run_id, sorted(self.queue))

    @workflow.query(name=QUERY_DEPTH)
    def depth(self) -> int:
        """Jobs in the queue (the ``skyshift_scheduler_queue_depth`` metric; a query instead of
        ``state`` so a scrape does not carry the whole queue)."""
        return len(self.queue)

    def _release(self, match: object, bump: bool = True) -> None:
        assert callable(match)
        kept = [r for r in self.reservations if not match(r)]
        if len(kept) != len(self.reservations) and bump:
            self.epoch += 1
        self.reservations = kept

    def _due(self) -> list[QueueEntry]:
        now = workflow.now().timestamp()
        return sorted(
            (e for e in self.queue.values() if e.tried_epoch < self.epoch and e.not_before <= now),
            key=order,
        )

    def _with_nominated(self, batch: list[QueueEntry]) -> list[QueueEntry]:
        """A round that places anything also tries the jobs waiting for the capacity their
        victims free: the victims queue again as soon as their replicas are deleted, and must
        not take that capacity back in a round without the preemptor."""
        if not batch:
            return batch
        now = workflow.now().timestamp()
        keys = {e.req.request.key for e in batch}
        more = [e for e in self.queue.values()
                if e.nominated_until > now and e.req.request.key not in keys]
        return sorted(batch + more, key=order) if more else batch

    def _expire(self) -> None:
        now = workflow.now().timestamp()
        self._release(lambda r: now - r.placed_at >= self.cfg.reservation_ttl)

    def _next_wakeup(self) -> timedelta | None:
        """When an expiring reservation or a delayed retry may make a queued job placeable."""
        if not self.queue:
            return None
        times = [e.not_before for e in self.queue.values() if e.not_before > 0]
        if self.reservations:
            times.append(min(r.placed_at for r in self.reservations) + self.cfg.reservation_ttl)
        if not times:
            return None
        return timedelta(seconds=max(min(times) - workflow.now().timestamp(), 0.001))

    @workflow.run
    async def run(self, inp: SchedulerInput) -> None:
        upsert([(KIND, "Scheduler")], current_keywords())
        while True:
            await wait(lambda: bool(self._due()), self._next_wakeup())
            self._expire()
            batch = self._with_nominated(self._due()[: self.cfg.max_batch])
            if batch:
                await self._place(batch)
            if history_full(self.cfg.history_limit):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(SchedulerInput(self.state(), self.cfg))

    async def _place_batch(self, inp: PlaceBatchInput) -> PlaceBatchResult:
        """One round's placements. A local activity: one marker event, where a regular one
        cost three and a workflow task of three more for its result (bench/temporal_cost.py).
        Run again after a crash of the control worker, it repeats the decisions already
        recorded (it rechecks them when local, see ``place_batch``)."""
        if workflow.patched(LOCAL_PLACE_PATCH):
            result: PlaceBatchResult = await workflow.execute_local_activity(
                act.PLACE_BATCH, inp, result_type=PlaceBatchResult,
                start_to_close_timeout=PLACE_TIMEOUT, retry_policy=STORE_RETRY,
            )
            return result
        result = await workflow.execute_activity(
            act.PLACE_BATCH, inp, result_type=PlaceBatchResult,
            start_to_close_timeout=PLACE_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=STORE_RETRY,
        )
        return result

    async def _place(self, batch: list[QueueEntry]) -> None:
        epoch = self.epoch
        held = list(self.reservations)
        self.placing = {e.req.request.uid for e in batch}
        result = await self._place_batch(PlaceBatchInput(batch, list(self.reservations)))
        now = workflow.now().timestamp()
        pending = any(out.status == "pending" for out in result.outcomes)
        if pending:
            for r in held:
                r.pending_behind = True
        # a job left pending may have been judged against this round's placements too: one that
        # ends before its cluster ever shows it busy frees nothing the skylet sees as freed
        behind = pending and workflow.patched(PLACED_BEHIND_PATCH)
        sent = {e.req.request.key: e for e in batch}
        for out in result.outcomes:
            entry = self.queue.get(out.key)
            current = entry is not None and entry.req.seq == out.seq and (
                entry.req.request.uid == out.uid
            )
            if out.status == "placed":
                per = sent[out.key].req.request.per_replica
                self.reservations += [
                    Reservation(out.uid, out.key, cluster, per, n, now, pending_behind=behind)
                    for cluster, n in out.assignments.items()
                ]
                if current:
                    del self.queue[out.key]
            elif out.status == "gone":
                if current:
                    del self.queue[out.key]
            elif current and entry is not None:
                entry.last_message = out.message
                entry.tried_epoch = epoch if out.status == "pending" else -1
                entry.not_before = now + RETRY_DELAY if out.status == "undelivered" else 0.0
                entry.undelivered = entry.undelivered or out.status == "undelivered"
                if out.victims:
                    entry.nominated, entry.nominated_until = out.victims, out.nominated_until
                    entry.waits_on = out.waits_on
        self.placing = set()
        early, self.early = self.early, []
        if early and workflow.patched(EARLY_PATCH):
            for c in early:  # a job's replicas can run before the batch that placed it returns
                self._confirm(c)
