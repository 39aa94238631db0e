"""The batch's working copy of per-node free capacity.

Placement is per node: a replica fits only where its whole request fits in one node's free
resources, so a cluster with two 2-cpu nodes cannot take a 3-cpu replica. Every replica placed in
a batch is subtracted here before the next job is looked at, which is what keeps one batch (and so
a burst of concurrent submissions) from overcommitting a cluster. The numbers are kept in small
mutable records rather than ``Resources`` values because this loop is the scheduler's hot path.

A batch cluster (``ClusterInfo.queue``) also has room in its own queue: replicas that fit some
node's capacity may wait there, each charged ``queue_charge`` against the room, so a batch never
queues more than the cluster's bound either.
"""

import math
from collections.abc import Sequence

from skyshift.models.quantity import Resources
from skyshift.scheduler.types import ClusterInfo

EPS = 1e-9
UNBOUNDED = 1 << 30  # replicas per node when a request asks for nothing at all


def fmt(x: float) -> str:
    """2 -> '2', 2.5 -> '2.5', 1/3 -> '0.333' (never exponent notation)."""
    return f"{max(x, 0.0):.3f}".rstrip("0").rstrip(".")


class _Node:
    __slots__ = ("acc", "cpus", "gpus", "memory", "name")

    def __init__(self, name: str, free: Resources) -> None:
        self.name = name
        self.cpus = free.cpus
        self.memory = free.memory
        self.gpus = free.gpus
        self.acc = dict(free.accelerators)

    def fit(self, req: Resources) -> int:
        """How many replicas of ``req`` fit on this node (the hot path: plain comparisons)."""
        n = UNBOUNDED
        if req.cpus > 0:
            n = int((self.cpus + EPS) // req.cpus)
        if req.memory > 0:
            m = int((self.memory + EPS) // req.memory)
            if m < n:
                n = m
        if req.gpus > 0:
            m = self.gpus // req.gpus
            if m < n:
                n = m
        if req.accelerators:
            for kind, count in req.accelerators.items():
                if count > 0:
                    m = self.acc.get(kind, 0) // count
                    if m < n:
                        n = m
        return n if n > 0 else 0

    def take(self, req: Resources, n: int) -> None:
        self.cpus -= req.cpus * n
        self.memory -= req.memory * n
        self.gpus -= req.gpus * n
        for kind, count in req.accelerators.items():
            self.acc[kind] = self.acc.get(kind, 0) - count * n

    def free(self) -> Resources:
        return Resources(self.cpus, self.memory, self.gpus, dict(self.acc))

    def set_aside(self, left: "_Node") -> None:
        """Take what is free here of ``left``, resource by resource; ``left`` keeps the rest."""
        for attr in ("cpus", "memory", "gpus"):
            got = max(min(getattr(self, attr), getattr(left, attr)), 0)
            setattr(self, attr, getattr(self, attr) - got)
            setattr(left, attr, getattr(left, attr) - got)
        for kind, want in left.acc.items():
            got = max(min(self.acc.get(kind, 0), want), 0)
            self.acc[kind] = self.acc.get(kind, 0) - got
            left.acc[kind] = want - got


def describe(req: Resources) -> str:
    """'cpus 4, memory 8000MB, A100 1' for messages."""
    parts = []
    if req.cpus > 0:
        parts.append(f"cpus {fmt(req.cpus)}")
    if req.memory > 0:
        parts.append(f"memory {fmt(req.memory)}MB")
    if req.gpus > 0:
        parts.append(f"gpus {req.gpus}")
    parts += [f"{k} {v}" for k, v in sorted(req.accelerators.items()) if v > 0]
    return ", ".join(parts) or "nothing"


def queue_charge(req: Resources) -> Resources:
    """What one replica waiting in a batch queue counts against the queue's bound: its request
    in whole CPUs, at least one (Slurm gives every job that much; a request for nothing must
    not fit an unbounded number of times)."""
    cpus = max(1.0, float(math.ceil(req.cpus - EPS)))
    return req if cpus == req.cpus else Resources(cpus, req.memory, req.gpus, req.accelerators)


class _Queue:
    __slots__ = ("caps", "jobs", "room")

    def __init__(self, name: str, room: Resources, jobs: int, caps: list[Resources]) -> None:
        self.room = _Node(name, room)
        self.jobs = jobs
        self.caps = caps


class Ledger:
    """Free capacity per cluster and node, as it stands after this batch's reservations."""

    def __init__(self, clusters: Sequence[ClusterInfo]) -> None:
        self._nodes: dict[str, list[_Node]] = {}
        self._initial: dict[str, list[_Node]] = {}
        self._initial_holds: dict[tuple[str, tuple[object, ...]], int] = {}
        self._queues: dict[str, _Queue] = {}
        self._held: dict[str, list[str]] = {}  # cluster -> jobs its free capacity is held for
        for c in clusters:
            if c.name in self._nodes:
                continue  # duplicate name: the first one wins
            ordered = sorted(c.nodes, key=lambda n: n.name)
            self._nodes[c.name] = [_Node(n.name, n.free) for n in ordered]
            self._initial[c.name] = [_Node(n.name, n.free) for n in ordered]
            if c.queue is not None:
                caps = [n.capacity if n.capacity is not None else n.free for n in ordered]
                self._queues[c.name] = _Queue(c.name, c.queue.room, c.queue.jobs, caps)

    def queue_fit(self, cluster: str, req: Resources) -> int:
        """Replicas of ``req`` the cluster's queue still takes (0 without a queue, or when no
        node of the cluster could ever run one)."""
        q = self._queues.get(cluster)
        if q is None or not any(req.fits_in(cap) for cap in q.caps):
            return 0
        return q.room.fit(queue_charge(req))

    def queue_jobs(self, cluster: str) -> int:
        """Jobs waiting in the cluster's queue, those queued by this batch included."""
        q = self._queues.get(cluster)
        return q.jobs if q is not None else 0

    def enqueue(self, cluster: str, req: Resources, replicas: int) -> int:
        """Queue ``replicas`` copies of ``req`` on ``cluster``; returns the jobs ahead of them."""
        q = self._queues[cluster]
        if q.room.fit(queue_charge(req)) < replicas:
            raise ValueError(f"the queue of cluster {cluster} cannot hold {replicas} replicas")
        q.room.take(queue_charge(req), replicas)
        ahead, q.jobs = q.jobs, q.jobs + replicas
        return ahead

    def fit_counts(self, cluster: str, req: Resources) -> list[int]:
        """Replicas of ``req`` each node of ``cluster`` still holds (node-name order)."""
        return [node.fit(req) for node in self._nodes.get(cluster, [])]

    def reserve(self, cluster: str, req: Resources, replicas: int, counts: list[int]) -> None:
        """Take ``replicas`` copies of ``req`` from ``cluster``, best fit first: the nodes with
        the least room for this request fill up first, keeping big holes for big replicas.
        ``counts`` is ``fit_counts`` for the same request, just computed by the caller."""
        nodes = self._nodes[cluster]
        order = sorted((c, i) for i, c in enumerate(counts) if c > 0)
        left = replicas
        for count, i in order:
            if left <= 0:
                break
            n = min(count, left)
            nodes[i].take(req, n)
            left -= n
        if left > 0:
            raise ValueError(f"cluster {cluster} cannot hold {replicas} replicas")

    def hold(self, cluster: str, need: Resources, key: str) -> None:
        """Set ``need`` aside on ``cluster`` for job ``key``, as far as it is free (even when
        one replica of it does not fit yet): no job placed after this gets that capacity."""
        if cluster not in self._nodes:
            return
        left = _Node(key, need)
        for node in self._nodes[cluster]:
            node.set_aside(left)
        self._held.setdefault(cluster, []).append(key)

    def explain(self, cluster: str, req: Resources, replicas: int, holds: int) -> str:
        """Why ``cluster`` cannot take all ``replicas`` (it holds ``holds`` of them now)."""
        nodes = self._nodes.get(cluster, [])
        if not nodes:
            return "insufficient resources: cluster reports no nodes"
        if holds > 0:
            why = f"insufficient resources: room for {holds} of {replicas} replicas"
        else:
            why = "insufficient resources: " + self._no_node_fits(nodes, req)
        initial = self._holds_at_start(cluster, req)
        if held := self._held.get(cluster):
            why += f" (its free capacity is held for {', '.join(held)}, which preempted jobs there)"
        elif initial > holds:
            why += " (free capacity was reserved by jobs placed earlier in this batch)"
        q = self._queues.get(cluster)
        if q is not None and any(req.fits_in(cap) for cap in q.caps) and not q.room.fit(
            queue_charge(req)
        ):
            # no count of the jobs waiting here: this text is the pending job's status, and a
            # reason that changed every round would rewrite every pending job every round
            why += "; its queue is full"
        return why

    def _holds_at_start(self, cluster: str, req: Resources) -> int:
        """Replicas of ``req`` the cluster held before this batch (cached per request shape,
        since a batch's pending jobs tend to repeat a few shapes)."""
        key = (cluster, (req.cpus, req.memory, req.gpus, *sorted(req.accelerators.items())))
        if (held := self._initial_holds.get(key)) is None:
            held = sum(node.fit(req) for node in self._initial.get(cluster, []))
            self._initial_holds[key] = held
        return held

    @staticmethod
    def _no_node_fits(nodes: list[_Node], req: Resources) -> str:
        short: list[str] = []
        if req.cpus > 0 and (top := max(n.cpus for n in nodes)) + EPS < req.cpus:
            short.append(f"cpus: need {fmt(req.cpus)}, largest free node has {fmt(top)}")
        if req.memory > 0 and (top := max(n.memory for n in nodes)) + EPS < req.memory:
            short.append(
                f"memory: need {fmt(req.memory)}MB, largest free node has {fmt(top)}MB"
            )
        if req.gpus > 0 and (igpu := max(n.gpus for n in nodes)) < req.gpus:
            short.append(f"gpus: need {req.gpus}, largest free node has {max(igpu, 0)}")
        for kind, count in sorted(req.accelerators.items()):
            if count > 0 and (iacc := max(n.acc.get(kind, 0) for n in nodes)) < count:
                short.append(f"{kind}: need {count}, largest free node has {max(iacc, 0)}")
        if short:
            return "; ".join(short)
        # Every resource is free somewhere, just never all on the same node.
        gaps = [(req.shortfall(n.free()), n.name) for n in nodes]
        gap, name = min(gaps, key=lambda g: (len(g[0]), g[1]))
        return (
            f"no single node has {describe(req)} free at once "
            f"(closest, {name}, is short of {'; '.join(gap)})"
        )
