"""Payloads of the Service lifecycle (workflow input, state, activity arguments and results).

The rules are in :mod:`skyshift.contract`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skyshift.compat.types import ServicePort, ServiceSpec, ServiceStatus
from skyshift.contract.jobs import ReadSpecResult


@dataclass
class ServiceTemplate:
    """The parts of a Service spec the lifecycle needs."""

    type: str = "ClusterIP"
    selector: dict[str, str] = field(default_factory=dict)
    ports: list[ServicePort] = field(default_factory=list)
    cluster_ip: str = ""
    primary_cluster: str = ""  # "" : where most matching replicas run


@dataclass
class ServiceConfig:
    """Timings of a service lifecycle (tests shorten them)."""

    refresh: float = 15.0  # seconds between two looks at the matching jobs (endpoints, primary)
    apply_timeout: float = 120.0  # a cluster that does not answer by then is tried next round
    teardown_timeout: float = 60.0
    history_limit: int = 1000


@dataclass
class LinkedCopy:
    """The service as applied to one cluster linked with its primary (a selector-less copy)."""

    cluster_ip: str = ""
    applied_generation: int = 0  # 0: not applied (yet, or failed)
    backends: dict[str, list[str]] = field(default_factory=dict)  # as last applied
    failed: str = ""  # why the cluster refused this generation for good ("" : it did not)
    failed_generation: int = 0


@dataclass
class Reach:
    """One cluster the service is reachable on, at which address (``role``: primary | linked)."""

    cluster: str
    cluster_ip: str = ""
    external_ip: str = ""
    role: str = "primary"


@dataclass
class ServiceState:
    """Everything a ServiceWorkflow carries over continue-as-new."""

    phase: str = "Pending"  # Pending | Ready | Failed | Deleting
    message: str = ""
    generation: int = 0
    cluster: str = ""  # where the service was applied ("" : nowhere yet)
    applied_generation: int = 0  # spec generation applied there
    failed: str = ""  # "<cluster>@<generation>" that failed for good (not tried again)
    cluster_ip: str = ""
    external_ip: str = ""
    endpoints: dict[str, int] = field(default_factory=dict)  # cluster -> running replicas
    deleting: bool = False
    touched: list[str] = field(default_factory=list)  # clusters it may exist on (teardown)
    backends: dict[str, list[str]] = field(default_factory=dict)  # as last applied
    needs_backends: bool = False  # the primary cluster said so when applied
    needs_remote: bool = False  # likewise, for the linked clusters' addresses only
    remote: dict[str, list[str]] = field(default_factory=dict)  # as last applied
    addresses: dict[str, list[str]] = field(default_factory=dict)  # cluster -> "host:port"s
    # cluster -> target port (text) -> "host:port"s, as each cluster said last (mesh patch)
    port_addresses: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    linked: dict[str, LinkedCopy] = field(default_factory=dict)  # copies on linked clusters


@dataclass
class ServiceInput:
    namespace: str
    name: str
    uid: str
    generation: int = 0
    template: ServiceTemplate | None = None
    invalid: str = ""
    deleting: bool = False
    state: ServiceState | None = None  # set on continue-as-new
    config: ServiceConfig = field(default_factory=ServiceConfig)


@dataclass
class Refresh:
    reason: str = ""


# ---- store (control queue, local activities) -----------------------------------------------


@dataclass
class ReadServiceInput:
    namespace: str
    name: str
    uid: str


@dataclass
class ReadServiceResult(ReadSpecResult):
    template: ServiceTemplate | None = None


@dataclass
class ServiceViewInput:
    namespace: str
    selector: dict[str, str] = field(default_factory=dict)


@dataclass
class ServiceView:
    """The matching jobs' replicas and the clusters, from one look at etcd."""

    placed: dict[str, int] = field(default_factory=dict)  # cluster -> replicas placed there
    running: dict[str, int] = field(default_factory=dict)  # cluster -> replicas running there
    clusters: dict[str, str] = field(default_factory=dict)  # cluster -> phase
    jobs: int = 0  # matching jobs
    job_uids: dict[str, list[str]] = field(default_factory=dict)  # cluster -> running jobs' uids
    links: dict[str, list[str]] = field(default_factory=dict)  # source -> Ready link targets
    # cluster -> the clusters a Ready direct Link joins it with, either direction
    peers: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class ServiceStatusPatch:
    """Status fields to set on a Service (None: leave as is). Applied only if the uid matches."""

    namespace: str
    name: str
    uid: str
    phase: str | None = None
    message: str | None = None
    cluster: str | None = None
    cluster_ip: str | None = None
    external_ip: str | None = None
    observed_generation: int | None = None
    workflow_id: str | None = None
    reachable: list[Reach] | None = None


@dataclass
class EndpointsWrite:
    """The Endpoints object of a service (same name): written, or removed when ``remove``."""

    namespace: str
    name: str
    service_uid: str
    selector: dict[str, str] = field(default_factory=dict)
    primary_cluster: str = ""
    endpoints: dict[str, int] = field(default_factory=dict)
    remove: bool = False
    addresses: dict[str, list[str]] = field(default_factory=dict)  # cluster -> "host:port"s


# ---- skylet queue ---------------------------------------------------------------------------


@dataclass
class ApplyServiceInput:
    cluster: str
    spec: ServiceSpec


@dataclass
class ApplyServiceResult:
    """The parts of the compat ``ServiceStatus`` the workflow keeps (flat: the workflow sandbox
    decodes this, and nested compat dataclasses would need compat's module in the sandbox)."""

    cluster_ip: str = ""
    external_ip: str = ""
    message: str = ""
    needs_backends: bool = False  # the cluster balances over the addresses it is given
    needs_remote: bool = False  # it adds the linked clusters' addresses to its own pods

    @classmethod
    def of(cls, status: ServiceStatus) -> ApplyServiceResult:
        return cls(status.cluster_ip, status.external_ip, status.message, status.needs_backends,
                   status.needs_remote)


@dataclass
class DeleteServiceInput:
    cluster: str
    namespace: str
    name: str


@dataclass
class AddressesInput:
    """Where the running replicas of ``job_uids`` serve each of ``ports`` on one cluster."""

    cluster: str
    job_uids: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)


@dataclass
class AddressesResult:
    addresses: dict[str, list[str]] = field(default_factory=dict)  # port (text) -> host:port
