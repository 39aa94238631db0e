"""Quota admission: a namespace's admitted jobs stay within every Quota of that namespace.

Pure, like the rest of the scheduler: ``QuotaBook`` starts from what each quota's namespace
already holds (jobs admitted before this round and not ended) and is charged, in the batch's
order, with every job the round places. A job whose request would take any quota of its
namespace over a hard limit is not placed; its Decision names the quota and what is short.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skyshift.models.quantity import Resources

ACCELERATOR_PREFIX = "accelerator/"
EPS = 1e-9


@dataclass
class QuotaInfo:
    """One Quota as the scheduler sees it: hard limits and what its namespace holds now."""

    name: str
    namespace: str
    hard: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)


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
    """A quota amount as a user writes it (memory in MB, cpus with up to 3 decimals)."""
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
        for q in sorted(quotas, key=lambda q: (q.namespace, q.name)):
            copy = QuotaInfo(q.name, q.namespace, dict(q.hard), dict(q.used))
            self.by_ns.setdefault(q.namespace, []).append(copy)

    def blocked(self, namespace: str, want: dict[str, float]) -> str | None:
        """Why ``want`` does not fit ``namespace``'s quotas (the first quota short), or None."""
        for q in self.by_ns.get(namespace, ()):
            short = [
                shortfall(key, q.used.get(key, 0.0), limit, want[key])
                for key, limit in sorted(q.hard.items())
                if want.get(key, 0.0) > 0 and q.used.get(key, 0.0) + want[key] > limit + EPS
            ]
            if short:
                return f"over Quota {q.namespace}/{q.name}: " + "; ".join(short)
        return None

    def charge(self, namespace: str, want: dict[str, float]) -> None:
        for q in self.by_ns.get(namespace, ()):
            add_into(q.used, want)
