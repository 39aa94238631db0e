"""Held starts: when the skylet's sync loop tells a job that a replica started.

A replica that goes from Pending to Running is counted Running in etcd in the round that sees it
(``activities.sync``), but its job's workflow is told one round later at the earliest, with the
job's other changes: once none of the job's replicas on this cluster is Pending any more, or
after ``hold`` rounds whatever else. A short job is then told only that it ended, and a job
whose replicas start over several rounds (Kubernetes pods) is told once; each report is a signal
and a workflow task. Kept apart from the sync loop: this is the one rule about *when* to tell,
the loop is about *what* changed.
"""

from __future__ import annotations

from skyshift.activities.clusters import ClusterContext, Seen, update_of
from skyshift.compat.types import ReplicaStatus
from skyshift.contract.jobs import ReplicaReport
from skyshift.contract.names import job_workflow_id


def plain_start(prev: Seen | None, r: ReplicaStatus) -> bool:
    """A replica the job knows as Pending that now runs, nothing else changed."""
    return (prev is not None and prev.state == "Pending" and r.state == "Running"
            and prev.attempt == r.attempt)


def release(ctx: ClusterContext, current: dict[str, ReplicaStatus],
            reports: dict[str, ReplicaReport], hold: int) -> None:
    """Add to ``reports`` (workflow id -> report) the held starts whose time has come, and
    forget the ones that went or changed since (those are reported as what they are now)."""
    if not ctx.held:
        return
    pending = {r.job_uid for r in current.values() if r.state == "Pending"}
    for name, since in list(ctx.held.items()):
        r = current.get(name)
        if r is None or r.state != "Running":
            del ctx.held[name]
            continue
        wf = job_workflow_id(r.namespace, r.job_name)
        age = ctx.rounds - since
        if wf in reports or (age >= 1 and r.job_uid not in pending) or age >= hold:
            del ctx.held[name]
            reports.setdefault(wf, ReplicaReport(ctx.name)).updates.append(update_of(r))
