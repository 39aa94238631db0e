"""``schedule_batch``: place a batch of pending jobs against one capacity snapshot.

The SchedulerWorkflow calls this from a single activity per batch, so it must be pure and
deterministic: the same jobs, clusters and policies always give the same decisions.

Semantics:

* Order. Jobs go by priority (higher first), then a job that preempted others first (see
  :mod:`skyshift.scheduler.preempt`), then creation time (earlier first), then key (and uid).
  Decisions come back in the order of the ``jobs`` argument, one per job.
* No overcommit. Each placed job's replicas are subtracted, node by node, from a working copy of
  the free capacity before the next job is considered.
* Gang placement. A job's replicas are placed all or nothing; a job that cannot get all of them
  reserves nothing.
* Backfill. Because a blocked job reserves nothing, lower-priority jobs behind it may use the
  capacity it cannot use (e.g. a 2-cpu job runs while an 8-cpu job waits for a big node). This
  keeps clusters busy; the price is that a large job can wait while small ones keep arriving, so
  starvation protection (e.g. priority aging) is the queue's business, not this function's.
  Except for a preemptor waiting for its victims (``nominated``): what is free on their
  clusters (``waits_on``) is held for it, up to its request, even while it does not fit yet.
* Spread. Feasible clusters are ranked (preference weights, then headroom, then name); the top
  one gets as many replicas as its nodes hold, the rest spill to the next, and so on. A job that
  fits in the best cluster stays there; 12 replicas over three clusters holding 4 each go 4/4/4.
* Batch queues. A batch cluster (Slurm) may also take replicas into its own queue, up to its
  bound (``ClusterInfo.queue``), so it starts the next job as soon as one ends. Only what free
  capacity anywhere cannot take right now is queued (preferred cluster first, then the one with
  the fewest jobs waiting); the message says where and behind how many jobs it waits.
* Quotas. A job whose request would take any Quota of its namespace over a hard limit (or past
  what its cohort lends) is not placed and reserves nothing; admitted jobs are charged to their
  namespace's quotas as the round goes, so a round never admits past a limit. Among jobs of
  equal priority, the namespace furthest below its weighted fair share goes first.
* Explanations. Every cluster a job did not use, or that could not take all of it, gets a reason
  in ``Decision.reasons``; ``Decision.message`` is a one-line summary.
"""

from collections.abc import Iterator, Sequence
from itertools import groupby

from skyshift.scheduler.capacity import Ledger
from skyshift.scheduler.plugins import (
    ClusterScore,
    applicable_policies,
    preference_score,
    rank,
    run_filters,
)
from skyshift.scheduler.quota import QuotaBook, QuotaInfo, demand, fair_order
from skyshift.scheduler.types import ClusterInfo, Decision, FilterPolicyInfo, JobRequest

MAX_GROUPS = 6  # distinct reasons spelled out in a pending job's message
MAX_NAMES = 5  # cluster names listed per reason in that message


def job_order(job: JobRequest) -> tuple[bool, int, float, str, str]:
    """Sort key for the batch: a job that evicted others for the capacity now freeing first (its
    victims' room is its: a victim queued again, even of higher priority after a cohort reclaim,
    must not take it back), then priority (higher first), then FIFO, then key and uid."""
    return (not job.nominated, -job.priority, job.created, job.key, job.uid)


def schedule_batch(
    jobs: list[JobRequest],
    clusters: list[ClusterInfo],
    policies: list[FilterPolicyInfo],
    quotas: Sequence[QuotaInfo] = (),
) -> list[Decision]:
    """Place ``jobs`` on ``clusters`` under ``policies`` and ``quotas``; one Decision per job,
    in input order.

    Clusters are considered in name order; if two share a name, the first one given is used.
    """
    unique: dict[str, ClusterInfo] = {}
    for c in clusters:
        unique.setdefault(c.name, c)
    ordered = [unique[name] for name in sorted(unique)]
    ledger = Ledger(ordered)
    book = QuotaBook(quotas)
    decisions: dict[int, Decision] = {}
    for i in admission_order(jobs, book):
        decisions[i] = admit_job(jobs[i], ordered, policies, ledger, book)
        if not decisions[i].placed:
            hold_for_preemptor(jobs[i], ledger)
    return [decisions[i] for i in range(len(jobs))]


def hold_for_preemptor(job: JobRequest, ledger: Ledger) -> None:
    """A preemptor not placed yet: what is free on its victims' clusters is its. Victims free
    their capacity one by one; backfill would give the first freed part to a job after it (one
    of the victims, queued again) and the preemptor would wait for that job to end."""
    if job.nominated and job.replicas > 0:
        need = job.per_replica.scaled(job.replicas)
        for cluster in job.waits_on:
            ledger.hold(cluster, need, job.key)


def admission_order(jobs: Sequence[JobRequest], book: QuotaBook) -> Iterator[int]:
    """Priority first; among equal priorities, with quotas, the namespace furthest below its
    weighted share (see :mod:`skyshift.scheduler.quota`); then FIFO."""
    ordered = sorted(range(len(jobs)), key=lambda i: job_order(jobs[i]))
    if not book.by_ns:
        yield from ordered
        return
    namespaces = [j.namespace for j in jobs]
    for _, level in groupby(ordered, key=lambda i: jobs[i].priority):
        yield from fair_order(list(level), namespaces, book)


def admit_job(
    job: JobRequest,
    clusters: Sequence[ClusterInfo],
    policies: Sequence[FilterPolicyInfo],
    ledger: Ledger,
    book: QuotaBook,
) -> Decision:
    """Place one job if its namespace's quotas have room for it, and charge them if placed."""
    want = demand(job.per_replica, max(job.replicas, 0), not job.admitted)
    if job.replicas > 0 and (why := book.blocked(job.namespace, want)) is not None:
        return Decision(job.key, job.uid, {}, {}, f"waiting for quota: {why}")
    decision = place_job(job, clusters, policies, ledger)
    if decision.placed:
        book.charge(job.namespace, want)
    return decision


def place_job(
    job: JobRequest,
    clusters: Sequence[ClusterInfo],
    policies: Sequence[FilterPolicyInfo],
    ledger: Ledger,
) -> Decision:
    """Place one job against ``ledger`` (reserving its replicas there when it is placed)."""
    if job.replicas <= 0:
        return Decision(job.key, job.uid, {}, {}, "nothing to place: 0 replicas requested")
    req = job.per_replica
    governing = applicable_policies(job, policies)
    reasons: dict[str, str] = {}
    scores: list[ClusterScore] = []
    counts: dict[str, list[int]] = {}
    for cluster in clusters:
        if (why := run_filters(job, cluster, governing)) is not None:
            reasons[cluster.name] = why
            continue
        per_node = ledger.fit_counts(cluster.name, req)
        holds = sum(per_node)
        queue = ledger.queue_fit(cluster.name, req)
        if holds == 0 and queue == 0:
            reasons[cluster.name] = ledger.explain(cluster.name, req, job.replicas, 0)
            continue
        counts[cluster.name] = per_node
        scores.append(ClusterScore(cluster.name, preference_score(job, cluster), holds, queue))
    ranked = rank(scores)

    room = sum(s.headroom + s.queue for s in ranked)
    if room < job.replicas:
        for s in ranked:
            reasons[s.name] = ledger.explain(s.name, req, job.replicas, s.headroom + s.queue)
        reasons = dict(sorted(reasons.items()))
        message = pending_message(job.replicas, len(clusters), room, reasons)
        if notes := missing_included(governing, {c.name for c in clusters}):
            message += "; " + notes
        return Decision(job.key, job.uid, {}, reasons, message)

    assignments: dict[str, int] = {}
    left = job.replicas
    for s in ranked:  # free capacity first, wherever it is
        if left == 0 or s.headroom == 0:
            continue
        n = min(s.headroom, left)
        ledger.reserve(s.name, req, n, counts[s.name])
        assignments[s.name] = n
        if s.headroom < left and not s.queue:
            reasons[s.name] = f"room for only {n} of {job.replicas} replicas"
        left -= n
    queued: list[str] = []
    for s in sorted(ranked, key=lambda s: (-s.preference, ledger.queue_jobs(s.name),
                                           -s.queue, s.name)):
        if left == 0 or s.queue == 0:
            continue
        n = min(s.queue, left)
        ahead = ledger.enqueue(s.name, req, n)
        assignments[s.name] = assignments.get(s.name, 0) + n
        queued.append(f"{n} queued in {s.name} behind {ahead} jobs" if n < job.replicas
                      else f"queued in {s.name} behind {ahead} jobs")
        left -= n
    used = ", ".join(assignments)
    for s in ranked:
        if s.name not in assignments:
            reasons[s.name] = f"not needed: higher-ranked {used} took all {job.replicas} replicas"
    spread = ", ".join(f"{name}={n}" for name, n in assignments.items())
    message = f"placed {job.replicas} replicas: {spread}"
    if queued:
        message += "; " + "; ".join(queued)
    return Decision(job.key, job.uid, assignments, dict(sorted(reasons.items())), message)


def missing_included(policies: Sequence[FilterPolicyInfo], known: set[str]) -> str:
    """Why a policy may block everything: it includes clusters that do not exist (yet)."""
    parts = []
    for p in policies:
        if missing := sorted(set(p.include) - known):
            shown = ", ".join(missing[:MAX_NAMES])
            more = f" and {len(missing) - MAX_NAMES} more" if len(missing) > MAX_NAMES else ""
            parts.append(
                f"FilterPolicy {p.name} includes clusters that do not exist: {shown}{more}"
            )
    return "; ".join(parts)


def pending_message(replicas: int, clusters: int, room: int, reasons: dict[str, str]) -> str:
    """'0/3 clusters fit: a, b: not Ready | c: insufficient resources: ...' (one line)."""
    if clusters == 0:
        return "0/0 clusters fit: no clusters are known"
    head = f"0/{clusters} clusters fit"
    if room > 0:
        head += f" {replicas} replicas (room for {room} in total)"
    groups: dict[str, list[str]] = {}
    for name, why in reasons.items():
        groups.setdefault(why, []).append(name)
    parts = []
    for why, names in list(groups.items())[:MAX_GROUPS]:
        shown = ", ".join(names[:MAX_NAMES])
        if len(names) > MAX_NAMES:
            shown += f" and {len(names) - MAX_NAMES} more"
        parts.append(f"{shown}: {why}")
    if len(groups) > MAX_GROUPS:
        parts.append(f"{len(groups) - MAX_GROUPS} more reasons")
    return f"{head}: " + " | ".join(parts)
