"""Plain dataclasses exchanged with cluster adapters.

They travel as Temporal activity payloads, so they hold only str/int/float/bool/list/dict/None and
nested dataclasses (``Resources``): no datetimes (times are epoch seconds), no enums, no vendor
objects. New fields must get defaults so old payloads still decode.
"""


import dataclasses
from dataclasses import dataclass, field
from typing import Any

from skyshift.models.quantity import Resources

#: Replica states every adapter reports (mirrors the pod phases of Kubernetes).
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
UNKNOWN = "Unknown"
STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, UNKNOWN)
FINISHED_STATES = (SUCCEEDED, FAILED)


@dataclass
class ReplicaSpec:
    """One replica of a job, as submitted to one cluster."""

    name: str  # deterministic "<job>-<uid8>-<rank>", unique per cluster; the idempotency key
    job_name: str
    namespace: str
    job_uid: str
    rank: int
    image: str = ""
    run: str = ""
    envs: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    resources: Resources = field(default_factory=Resources)
    restart_policy: str = "Never"
    labels: dict[str, str] = field(default_factory=dict)
    attempt: int = 0  # bumped when SkyShift restarts the replica

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["resources"] = self.resources.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReplicaSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["resources"] = Resources.from_dict(data.get("resources"))
        return cls(**kwargs)


@dataclass
class ReplicaStatus:
    """What a cluster says about one replica right now."""

    name: str
    job_uid: str
    namespace: str
    job_name: str
    rank: int
    state: str  # one of STATES
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    started_at: float | None = None  # epoch seconds
    finished_at: float | None = None  # epoch seconds
    attempt: int = 0

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass
class ExecResult:
    """Outcome of running a command inside a replica."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""


@dataclass
class NodeState:
    """One node: what it has and what is still free."""

    name: str
    capacity: Resources = field(default_factory=Resources)
    # capacity minus everything running there now (SkyShift's replicas or not)
    allocatable: Resources = field(default_factory=Resources)


@dataclass
class QueueState:
    """A batch manager's own queue (Slurm): what waits in it, and how much SkyShift may add.

    SkyShift may place work on such a cluster beyond its free capacity, up to ``limit`` of
    pending requests, so the cluster starts the next job the moment one ends instead of idling
    for a SkyShift round trip. ``queued`` counts every pending job's request (SkyShift's or
    not): the scheduler promises at most free capacity plus ``limit - queued``."""

    limit: Resources = field(default_factory=Resources)
    queued: Resources = field(default_factory=Resources)
    jobs: int = 0  # jobs pending in it now


@dataclass
class ClusterState:
    """Health and capacity of a whole cluster, from one call."""

    healthy: bool
    message: str = ""
    nodes: list[NodeState] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # e.g. partition or region
    queue: QueueState | None = None  # None: the manager keeps no queue of its own

    def capacity(self) -> Resources:
        total = Resources()
        for node in self.nodes:
            total = total + node.capacity
        return total

    def allocatable(self) -> Resources:
        total = Resources()
        for node in self.nodes:
            total = total + node.allocatable
        return total


# ---- services -------------------------------------------------------------------------------

#: Service types (the Kubernetes ones; the original SkyShift offered the same three).
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")


@dataclass
class ServicePort:
    """One port of a service: ``port`` on the service address, ``target_port`` on the replicas
    (0: the same as ``port``), ``node_port`` for NodePort/LoadBalancer (0: the cluster picks)."""

    port: int
    target_port: int = 0
    node_port: int = 0
    protocol: str = "TCP"


@dataclass
class ServiceSpec:
    """A service as applied to one cluster: a stable address in front of the SkyShift replicas
    of ``namespace`` whose job labels include ``selector``. ``name`` is the idempotency key."""

    name: str
    namespace: str
    uid: str = ""
    type: str = "ClusterIP"
    selector: dict[str, str] = field(default_factory=dict)
    ports: list[ServicePort] = field(default_factory=list)
    cluster_ip: str = ""  # requested address ("" lets the cluster pick)
    # target port (as text) -> "host:port" of the replicas behind it, on this cluster and on
    # the clusters linked to it; used by managers whose services do not select replicas
    # themselves (local: HAProxy)
    backends: dict[str, list[str]] = field(default_factory=dict)
    # the same, only the addresses on the linked clusters (Kubernetes: its own EndpointSlices)
    remote_backends: dict[str, list[str]] = field(default_factory=dict)
    # a copy of the service on a cluster linked with its primary: it selects nothing itself
    # (Kubernetes: a selector-less Service) and fronts ``backends``, every replica it reaches
    # (its own cluster's included)
    linked: bool = False


@dataclass
class ServiceStatus:
    """What the cluster made of a service: its addresses and the ports as allocated."""

    name: str
    namespace: str
    cluster_ip: str = ""
    external_ip: str = ""  # LoadBalancer ingress (IP or hostname), "" while pending or none
    ports: list[ServicePort] = field(default_factory=list)
    message: str = ""
    needs_backends: bool = False  # it balances over ServiceSpec.backends (not a selector)
    needs_remote: bool = False  # it adds ServiceSpec.remote_backends to what it selects
