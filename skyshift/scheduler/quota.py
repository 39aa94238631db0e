"""Quota admission and fair share: what a namespace may hold, and who goes first when contended.

Pure, like the rest of the scheduler. ``QuotaBook`` starts from what each quota's namespace
already holds (jobs admitted before this round and not ended) and is charged, in the batch's
order, with every job the round places.

* Hard limits. A job whose request would take a quota of its namespace over ``hard`` is not
  placed; its Decision names the quota and what is short.
* Borrowing. A quota in a ``cohort`` may go over its own ``hard`` with what the cohort's other
  members leave unused: the cohort as a whole stays within the sum of its members' ``hard``, and
  the quota within ``hard + borrowingLimit`` (no limit given: as much as the cohort has unused).
* Fair share. Among jobs of equal priority, the namespace furthest below its weighted share goes
  first: its dominant share (the largest fraction of its cohort's total it holds of any
  resource, or of its own ``hard`` outside a cohort) divided by its ``weight``. Namespaces
  without a quota have share 0: fairness governs those an administrator gave a quota.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from skyshift.models.quantity import Resources
from skyshift.models.quota import ACCELERATOR_PREFIX

EPS = 1e-9


@dataclass
class QuotaInfo:
    """One Quota as the scheduler sees it: limits, cohort, and what its namespace holds now."""

    name: str
    namespace: str
    hard: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    cohort: str = ""
    weight: float = 1.0
    borrowing_limit: dict[str, float] = field(default_factory=dict)  # missing key: no limit



def demand(per_replica: Resources, replicas: int, new_job: bool) -> dict[str, float]:
    """What admitting ``replicas`` more replicas of a job charges, in quota keys."""
    out = {
        "cpus": per_replica.cpus * replicas,
        "memory": per_replica.memory * replicas,
        "gpus": float(per_replica.gpus * replicas),
        "replicas": float(replicas),
        "jobs": 1.0 if new_job else 0.0,
    }
    for kind, n in per_replica.accelerators.items():
        out[ACCELERATOR_PREFIX + kind] = float(n * replicas)
    return out


def add_into(total: dict[str, float], more: dict[str, float]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0.0) + value


def show(key: str, value: float) -> str:
    """A quota amount as a user writes it (memory in MB or Gi, others with up to 3 decimals)."""
    if key == "memory":
        gib = value * 1e6 / 2**30  # memory is held in MB (10^6 bytes)
        return f"{round(value, 3):g}MB" if gib < 1 else f"{gib:.4g}Gi"
    return f"{round(value, 3):g}"


def shortfall(key: str, used: float, limit: float, want: float) -> str:
    """One line of a quota-blocked job's reason."""
    if want > limit + EPS:
        return (
            f"{key}: the job alone needs {show(key, want)}, over the hard limit "
            f"{show(key, limit)} (raise the quota or shrink the job)"
        )
    return f"{key} {show(key, used)} of {show(key, limit)} used, needs {show(key, want)} more"


class QuotaBook:
    """The quotas of a round and what their namespaces hold, charged as jobs are placed."""

    def __init__(self, quotas: Sequence[QuotaInfo]) -> None:
        self.by_ns: dict[str, list[QuotaInfo]] = {}
        self.cohorts: dict[str, list[QuotaInfo]] = {}
        for q in sorted(quotas, key=lambda q: (q.namespace, q.name)):
            copy = QuotaInfo(
                q.name,
                q.namespace,
                dict(q.hard),
                dict(q.used),
                q.cohort,
                q.weight,
                dict(q.borrowing_limit),
            )
            self.by_ns.setdefault(q.namespace, []).append(copy)
            if copy.cohort:
                self.cohorts.setdefault(copy.cohort, []).append(copy)
        # the denominators of the shares: hard limits do not change during a round
        self.totals: dict[tuple[str, str], float] = {}
        for members in self.cohorts.values():
            for m in members:
                for key in m.hard:
                    self.totals[(m.cohort, key)] = sum(o.hard.get(key, 0.0) for o in members)

    def blocked(self, namespace: str, want: dict[str, float]) -> str | None:
        """Why ``want`` does not fit ``namespace``'s quotas (the first quota short), or None."""
        for q in self.by_ns.get(namespace, ()):
            short = [
                why
                for key, limit in sorted(q.hard.items())
                if want.get(key, 0.0) > 0 and (why := self._short(q, key, limit, want[key]))
            ]
            if short:
                return f"over Quota {q.namespace}/{q.name}: " + "; ".join(short)
        return None

    def _short(self, q: QuotaInfo, key: str, limit: float, want: float) -> str | None:
        used = q.used.get(key, 0.0)
        if used + want <= limit + EPS:
            return None
        if not q.cohort:
            return shortfall(key, used, limit, want)
        cap = limit + q.borrowing_limit[key] if key in q.borrowing_limit else None
        if cap is not None and used + want > cap + EPS:
            return (
                f"{key} {show(key, used)} used of {show(key, limit)} plus at most "
                f"{show(key, cap - limit)} borrowed, needs {show(key, want)} more"
            )
        free = self.cohort_free(q.cohort, key)
        if want > free + EPS:
            return (
                f"{key} {show(key, used)} of {show(key, limit)} used, needs "
                f"{show(key, want)} more, and cohort {q.cohort} has {show(key, free)} unused"
            )
        return None

    def cohort_free(self, cohort: str, key: str) -> float:
        """What the cohort's members leave unused of ``key``, in all (members that bound it)."""
        members = [m for m in self.cohorts.get(cohort, ()) if key in m.hard]
        return sum(m.hard[key] for m in members) - sum(m.used.get(key, 0.0) for m in members)

    def charge(self, namespace: str, want: dict[str, float]) -> None:
        for q in self.by_ns.get(namespace, ()):
            add_into(q.used, want)

    def share(self, namespace: str) -> float:
        """The namespace's weighted dominant share (0 without a quota)."""
        best = 0.0
        for q in self.by_ns.get(namespace, ()):
            for key in q.hard:
                total = self._total(q, key)
                if total > EPS:
                    best = max(best, q.used.get(key, 0.0) / total / max(q.weight, EPS))
        return best

    def _total(self, q: QuotaInfo, key: str) -> float:
        return self.totals[(q.cohort, key)] if q.cohort else q.hard[key]


def fair_order(
    ordered: Sequence[int],
    namespace_of: Sequence[str],
    book: QuotaBook,
) -> Iterator[int]:
    """Yield ``ordered`` (job indices in priority-then-FIFO order, one priority level) so that
    each next one is the first waiting job of the namespace with the smallest share right now.
    ``book`` is read again after every yield, so the caller's charges move the shares."""
    queues: dict[str, list[int]] = {}
    for i in ordered:
        queues.setdefault(namespace_of[i], []).append(i)
    rank = {i: n for n, i in enumerate(ordered)}
    heads = dict.fromkeys(queues, 0)
    while heads:
        ns = min(heads, key=lambda n: (book.share(n), rank[queues[n][heads[n]]]))
        yield queues[ns][heads[ns]]
        heads[ns] += 1
        if heads[ns] == len(queues[ns]):
            del heads[ns]
