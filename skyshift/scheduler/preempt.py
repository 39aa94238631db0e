"""Preemption: which running jobs a pending higher-priority job may evict so that it fits.

Pure, like the rest of the scheduler. A job the round could not place (no cluster has room, or
its namespace's quota or cohort is spent) whose ``preemption`` is ``PreemptLowerPriority`` may
evict jobs of strictly lower priority, wherever they run:

* Candidates are whole jobs (a gang is evicted whole, never some of its replicas).
* Reclaim: a job that stays within its own namespace's cohort quota takes back what that quota
  guarantees from the namespaces borrowing in the cohort, whatever their jobs' priority (Kueue's
  ``reclaimWithinCohort: Any``): lent quota is lent, not given. A job that would borrow never
  evicts a cohort member's job running within that member's own quota.
* Order of choice: jobs of namespaces running on capacity borrowed from their cohort first
  (the lender reclaims it), then the lowest priority, then the most recently started.
* Minimal: candidates are taken in that order until the job fits (capacity after the victims'
  replicas are freed, and its quotas after their usage is returned), then every victim the job
  still fits without is spared again, most important first.
* Nothing is evicted when even evicting every candidate would not make the job fit.

Where a victim's replicas ran on a cluster is known, not on which node: a freed replica is
given back to the fullest node it fits on (within the node's capacity), which is exact for
one-node clusters and a fair guess otherwise; the job is placed for real only once the capacity
shows free, so a wrong guess costs a wait, never an overcommit.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from skyshift.models.quantity import Resources
from skyshift.scheduler.capacity import EPS, Ledger
from skyshift.scheduler.core import admit_job
from skyshift.scheduler.quota import QuotaBook, QuotaInfo, demand
from skyshift.scheduler.types import ClusterInfo, FilterPolicyInfo, JobRequest, NodeInfo

PREEMPT_LOWER = "PreemptLowerPriority"
NEVER = "Never"


@dataclass
class Running:
    """A job holding replicas now: what eviction would free."""

    key: str  # "namespace/name"
    uid: str
    namespace: str
    priority: int
    started: float  # epoch seconds (later: evicted first among equals)
    per_replica: Resources
    placement: dict[str, int] = field(default_factory=dict)  # cluster -> replicas


def borrowing(quotas: Sequence[QuotaInfo]) -> set[str]:
    """Namespaces that hold more than a cohort quota's own ``hard`` of some resource."""
    return {
        q.namespace
        for q in quotas
        if q.cohort and any(q.used.get(k, 0.0) > v + EPS for k, v in q.hard.items())
    }


def cohort_view(job: JobRequest, quotas: Sequence[QuotaInfo]) -> tuple[set[str], set[str]]:
    """Which namespaces of ``job``'s cohorts it reclaims from, and which it must leave alone.

    Admitted within every cohort quota of its own namespace, ``job`` takes lent quota back from
    the namespaces borrowing in those cohorts, whatever their jobs' priority. Needing to borrow
    itself, it may not evict a job of a cohort namespace that is within its own quota: that
    namespace would take the quota straight back (the two would evict each other forever)."""
    own = [q for q in quotas if q.namespace == job.namespace and q.cohort]
    if not own:
        return set(), set()
    need = demand(job.per_replica, job.replicas, not job.admitted)
    within = all(
        q.used.get(k, 0.0) + need.get(k, 0.0) <= v + EPS for q in own for k, v in q.hard.items()
    )
    cohorts = {q.cohort for q in own}
    peers = [q for q in quotas if q.cohort in cohorts and q.namespace != job.namespace]
    borrowers = borrowing(peers)
    if within:
        return borrowers, set()
    return set(), {q.namespace for q in peers} - borrowers


def candidates(
    job: JobRequest, running: Sequence[Running], quotas: Sequence[QuotaInfo]
) -> list[Running]:
    """Jobs that may be evicted, in the order they are taken: borrowers, lowest, newest. Those of
    lower priority (but not a cohort lender's within its quota when ``job`` would borrow), and
    those of the namespaces ``job`` reclaims lent quota from."""
    lenders = borrowing(quotas)
    reclaim, protected = cohort_view(job, quotas)
    pool = [
        r
        for r in running
        if r.key != job.key
        and (r.namespace in reclaim or (r.priority < job.priority and r.namespace not in protected))
    ]
    return sorted(pool, key=lambda r: (r.namespace not in lenders, r.priority, -r.started, r.key))


def freed_clusters(
    clusters: Sequence[ClusterInfo],
    victims: Sequence[Running],
) -> list[ClusterInfo]:
    """The clusters with the victims' replicas given back to their nodes."""
    out = []
    for c in clusters:
        free = [n.free for n in c.nodes]
        for v in victims:
            for _ in range(v.placement.get(c.name, 0)):
                _give_back(c.nodes, free, v.per_replica)
        nodes = [NodeInfo(n.name, f, n.capacity) for n, f in zip(c.nodes, free, strict=True)]
        out.append(replace(c, nodes=nodes))
    return out


def _give_back(nodes: Sequence[NodeInfo], free: list[Resources], req: Resources) -> None:
    room = [
        i for i, n in enumerate(nodes) if n.capacity is None or (free[i] + req).fits_in(n.capacity)
    ]
    if room:
        i = min(room, key=lambda i: (free[i].cpus, free[i].memory, nodes[i].name))
        free[i] = free[i] + req


def freed_quotas(quotas: Sequence[QuotaInfo], victims: Sequence[Running]) -> list[QuotaInfo]:
    """The quotas with the victims' usage returned."""
    out = []
    for q in quotas:
        used = dict(q.used)
        for v in victims:
            if v.namespace == q.namespace:
                for key, value in demand(v.per_replica, sum(v.placement.values()), True).items():
                    used[key] = used.get(key, 0.0) - value
        out.append(replace(q, used=used))
    return out


def fits(
    job: JobRequest,
    clusters: Sequence[ClusterInfo],
    policies: Sequence[FilterPolicyInfo],
    quotas: Sequence[QuotaInfo],
    victims: Sequence[Running],
) -> bool:
    """Whether ``job`` is placed once ``victims`` are gone (nothing else placed meanwhile)."""
    ordered = sorted(freed_clusters(clusters, victims), key=lambda c: c.name)
    book = QuotaBook(freed_quotas(quotas, victims))
    return admit_job(job, ordered, policies, Ledger(ordered), book).placed


def choose_victims(
    job: JobRequest,
    running: Sequence[Running],
    clusters: Sequence[ClusterInfo],
    policies: Sequence[FilterPolicyInfo] = (),
    quotas: Sequence[QuotaInfo] = (),
) -> list[Running]:
    """The fewest candidates whose eviction lets ``job`` fit ([] when none would)."""
    if job.preemption == NEVER or job.replicas <= 0:
        return []
    chosen: list[Running] = []
    for c in candidates(job, running, quotas):
        chosen.append(c)
        if fits(job, clusters, policies, quotas, chosen):
            break
    else:
        return []
    # spare again every victim the job fits without, the most important first
    for v in sorted(chosen, key=lambda r: (-r.priority, r.started, r.key)):
        rest = [r for r in chosen if r is not v]
        if rest and fits(job, clusters, policies, quotas, rest):
            chosen = rest
    return chosen
