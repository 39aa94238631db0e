"""What a ``skypilot`` manager makes of a listing of SkyPilot's queues (pure, no I/O): each
replica's latest job, the jobs of an attempt sent twice, and what pending and running jobs
reserve on each SkyPilot cluster's nodes."""

from __future__ import annotations

from skyshift.compat.skypilot.client import SkyJob
from skyshift.compat.skypilot.map import JobMeta, status_of
from skyshift.compat.types import PENDING, RUNNING, NodeState
from skyshift.models.quantity import Resources

Found = tuple[str, SkyJob, JobMeta]  # (sky cluster, job, identity)
FINISHED = ("SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_DRIVER")


def latest(found: list[Found]) -> dict[str, Found]:
    """Per replica name, its highest attempt (the first job of that attempt: a second one is
    the same attempt sent twice, see ``duplicates``)."""
    out: dict[str, Found] = {}
    for item in found:
        meta = item[2]
        have = out.get(meta.name)
        if have is None or meta.attempt > have[2].attempt or (
                meta.attempt == have[2].attempt and order(item) < order(have)):
            out[meta.name] = item
    return out


def order(item: Found) -> tuple[int, str]:
    """Which of two jobs of one replica attempt came first (job ids count per SkyPilot
    cluster: ties go by cluster name, the same way everywhere)."""
    return item[1].job_id, item[0]


def duplicates(found: list[Found]) -> list[Found]:
    """Jobs of a replica attempt other than its first (the attempt was sent twice)."""
    first: dict[tuple[str, int], Found] = {}
    extra: list[Found] = []
    for item in sorted(found, key=order):
        key = (item[2].name, item[2].attempt)
        if key in first:
            extra.append(item)
        else:
            first[key] = item
    return [f for f in extra if f[1].status not in FINISHED]


def reserved(found: list[Found]) -> dict[str, list[Resources]]:
    """Per SkyPilot cluster, what SkyShift's pending and running jobs there reserve."""
    out: dict[str, list[Resources]] = {}
    for cluster, job, meta in found:
        if status_of(meta, job, None).state in (PENDING, RUNNING):
            out.setdefault(cluster, []).append(meta.reservation)
    return out


def allocate(nodes: list[NodeState], used: list[Resources]) -> list[NodeState]:
    """Nodes with each reservation taken from the first node it fits (SkyPilot does not say
    where a job runs); what fits nowhere is taken from the first node."""
    free = [n.capacity for n in nodes]
    for request in sorted(used, key=lambda r: -r.cpus):
        i = next((k for k, f in enumerate(free) if request.fits_in(f)), 0)
        if free:
            free[i] = free[i] - request
    return [NodeState(name=n.name, capacity=n.capacity, allocatable=f)
            for n, f in zip(nodes, free, strict=True)]
