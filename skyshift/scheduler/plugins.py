"""Filter and score plugins: which clusters a job may use, and in what order it prefers them.

Filters are small functions returning ``None`` when a cluster passes and a human-readable reason
when it does not; the first rejecting filter's reason is what the user sees for that cluster.
Scores rank the clusters that pass: weighted preferences first, then headroom (how many of this
job's replicas the cluster's nodes still hold, i.e. spread load towards the emptiest cluster),
then the cluster name so equal clusters always come out in the same order.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skyshift.scheduler.labels import selector_matches, selector_mismatch
from skyshift.scheduler.types import ClusterInfo, FilterPolicyInfo, JobRequest

FilterPlugin = Callable[[JobRequest, ClusterInfo, Sequence[FilterPolicyInfo]], str | None]


def applicable_policies(
    job: JobRequest, policies: Sequence[FilterPolicyInfo]
) -> list[FilterPolicyInfo]:
    """The FilterPolicies that govern ``job``: same namespace, selector a subset of its labels.

    An empty selector selects every job of the namespace (Kubernetes semantics; the original
    SkyShift ignored such policies). Sorted by name so the reported policy is deterministic.
    """
    chosen = [
        p for p in policies
        if p.namespace == job.namespace
        and all(job.labels.get(k) == v for k, v in p.label_selector.items())
    ]
    return sorted(chosen, key=lambda p: p.name)


def cluster_ready(
    job: JobRequest, cluster: ClusterInfo, policies: Sequence[FilterPolicyInfo]
) -> str | None:
    """Only Ready clusters take new replicas."""
    return None if cluster.ready else "not Ready"


def filter_policies(
    job: JobRequest, cluster: ClusterInfo, policies: Sequence[FilterPolicyInfo]
) -> str | None:
    """Every applicable policy must allow the cluster: not excluded, and included when the
    policy has an include list (an empty include list restricts nothing)."""
    for policy in policies:
        if cluster.name in policy.exclude:
            return f"excluded by FilterPolicy {policy.name}"
        if policy.include and cluster.name not in policy.include:
            return f"not in the include list of FilterPolicy {policy.name}"
    return None


def placement_filters(
    job: JobRequest, cluster: ClusterInfo, policies: Sequence[FilterPolicyInfo]
) -> str | None:
    """A cluster passes when it matches ANY of the job's filters (no filters: all pass); inside
    one filter every label and every expression must hold."""
    if not job.filters:
        return None
    failures: list[str] = []
    for i, flt in enumerate(job.filters):
        unmet = selector_mismatch(flt.match_labels, flt.match_expressions, cluster.labels)
        if not unmet:
            return None
        detail = ", ".join(unmet)
        if len(job.filters) > 1 or flt.name:
            detail = f"{flt.name or f'filter {i + 1}'}: {detail}"
        failures.append(detail)
    return "does not match placement filters: " + "; ".join(failures)


FILTERS: tuple[FilterPlugin, ...] = (cluster_ready, filter_policies, placement_filters)


def run_filters(
    job: JobRequest, cluster: ClusterInfo, policies: Sequence[FilterPolicyInfo]
) -> str | None:
    """The first rejecting filter's reason, or None when ``cluster`` may take ``job``."""
    for plugin in FILTERS:
        if (why := plugin(job, cluster, policies)) is not None:
            return why
    return None


def preference_score(job: JobRequest, cluster: ClusterInfo) -> int:
    """Sum of the weights of the job's preferences the cluster matches."""
    return sum(
        p.weight for p in job.preferences
        if selector_matches(p.match_labels, p.match_expressions, cluster.labels)
    )


@dataclass(frozen=True)
class ClusterScore:
    """A feasible cluster's standing for one job; ``rank_key`` sorts best first."""

    name: str
    preference: int
    headroom: int  # replicas of this job the cluster's nodes still hold
    queue: int = 0  # replicas of this job its batch queue still takes (beyond ``headroom``)

    def rank_key(self) -> tuple[int, int, str]:
        return (-self.preference, -self.headroom, self.name)


def rank(scores: Sequence[ClusterScore]) -> list[ClusterScore]:
    """Best cluster first: preferences, then headroom, then name (deterministic)."""
    return sorted(scores, key=ClusterScore.rank_key)
