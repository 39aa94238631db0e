"""Which provisioned cluster should grow for a job that fits nowhere now (pure, no I/O).

A Cluster with ``spec.provision`` may add nodes up to its ``max`` (a new SkyPilot cluster of
nodes of its shape). When a job's replicas wait for capacity, the scheduling activity asks
:func:`grow_for` whether such a cluster would take the job once grown, and by how many nodes;
it then signals that cluster's workflow and tells the job "provisioning <cluster> (ETA ...)".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from skyshift.models.quantity import Resources
from skyshift.scheduler.plugins import applicable_policies, filter_policies, placement_filters
from skyshift.scheduler.types import ClusterInfo, FilterPolicyInfo, JobRequest


@dataclass
class Growable:
    """A provisioned cluster as growth sees it. ``node``: one new node's resources (0 cpus or
    memory: the infra's default, taken to hold one replica); ``free_fit`` is computed per job."""

    name: str
    labels: dict[str, str]
    node: Resources
    nodes: int  # nodes UP now
    max_nodes: int
    busy: bool = False  # provisioning or scaling already: wait for it, ask nothing more
    free: list[Resources] = field(default_factory=list)  # what its nodes have free now


@dataclass
class Growth:
    cluster: str
    nodes: int  # total nodes to grow to
    busy: bool


def per_node(req: Resources, node: Resources) -> int:
    """Replicas of ``req`` one new node holds (unknown shape: one)."""
    if not node.cpus and not node.memory:
        return 1
    n = 0
    free = node
    while req.fits_in(free) and n < 1024:
        free, n = free - req, n + 1
    return n


def grow_for(job: JobRequest, clusters: Sequence[Growable],
             policies: Sequence[FilterPolicyInfo]) -> Growth | None:
    """The first cluster (by name) that is allowed to take ``job`` and would hold all of its
    replicas once grown within its max; a busy one that would is reported without growing."""
    governing = applicable_policies(job, policies)
    for c in sorted(clusters, key=lambda c: c.name):
        info = ClusterInfo(c.name, c.labels, True, [])
        if filter_policies(job, info, governing) or placement_filters(job, info, governing):
            continue
        each = per_node(job.per_replica, c.node)
        if each == 0:
            continue
        held = sum(per_node(job.per_replica, f) if (f.cpus or f.memory) else 0 for f in c.free)
        need = math.ceil(max(job.replicas - held, 1) / each)
        if c.nodes + need > c.max_nodes:
            continue
        return Growth(c.name, c.nodes + need, c.busy)
    return None
