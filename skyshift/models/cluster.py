"""Cluster: a Kubernetes, Slurm, Ray, local or cloud cluster SkyShift places work on."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from skyshift.models import managers
from skyshift.models.base import SkyObject
from skyshift.models.cluster_provision import ProvisionSpec, ProvisionStatus, flat_provision
from skyshift.models.meta import Condition, StrictModel
from skyshift.models.quantity import parse_accelerators, parse_cpus, parse_memory

ClusterPhase = Literal["Init", "Provisioning", "Ready", "Scaling", "Error", "Failed",
                       "Terminating", "Deleting"]
DEFAULT_MANAGER = "k8"


class ClusterSpec(StrictModel):
    """How to reach the cluster, or (``provision``) what to provision through SkyPilot.

    ``provision: true`` with the original's flat fields (cloud, region, cpus, memory,
    accelerators, num_nodes) is read as the structured form; a provisioned cluster's manager is
    ``skypilot`` (its replicas run as SkyPilot jobs on the clusters the lifecycle launches)."""

    manager: str = DEFAULT_MANAGER
    cloud: str = ""
    region: str = ""
    cpus: float = 0.0
    memory: float = 0.0
    disk_size: float = 0.0
    accelerators: dict[str, int] = Field(default_factory=dict)
    ports: list[int] = Field(default_factory=list)
    num_nodes: int = Field(default=1, ge=1)
    provision: ProvisionSpec | None = None
    config_path: str = ""
    context: str = ""
    access_config: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("manager", mode="before")
    @classmethod
    def _manager(cls, v: object) -> str:
        return managers.canonical(v)

    @model_validator(mode="before")
    @classmethod
    def _flat_provision(cls, data: Any) -> Any:
        """``provision: true`` + the original's flat fields -> the structured spec."""
        return flat_provision(data) if isinstance(data, dict) else data

    @field_validator("cloud", "region")
    @classmethod
    def _cloud_region(cls, v: str, info: ValidationInfo) -> str:
        if len(v) > 64:
            raise ValueError(f"{info.field_name}: at most 64 characters")
        return v

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, v: object) -> float:
        return parse_cpus(v)

    @field_validator("memory", "disk_size", mode="before")
    @classmethod
    def _memory(cls, v: object) -> float:
        return parse_memory(v)

    @field_validator("accelerators", mode="before")
    @classmethod
    def _acc(cls, v: object) -> dict[str, int]:
        return parse_accelerators(v)

    @model_validator(mode="after")
    def _provisioned(self) -> ClusterSpec:
        """A provisioned cluster is run through SkyPilot; cloud/region only name its infra."""
        if self.provision is not None:
            runner = managers.provisioner()
            if self.manager not in (runner, DEFAULT_MANAGER):  # the default: none was given
                raise ValueError(f"manager: a provisioned cluster's manager is {runner}, "
                                 f"not {self.manager}")
            self.__dict__["manager"] = runner
        elif self.cloud or self.region:
            field = "cloud" if self.cloud else "region"
            raise ValueError(f"{field}: only for a provisioned cluster (provision: true, "
                             f"or provision.infra like aws/us-east-1)")
        return self

    @model_validator(mode="after")
    def _manager_config(self) -> ClusterSpec:
        """The manager's own check of ``spec.config`` (a Ray cluster needs its dashboard URL)."""
        names = managers.declared(self.manager)
        problem = names.check(self.config) if names and names.check else ""
        if problem:
            raise ValueError(problem)
        return self


class NodeResources(StrictModel):
    cpus: float = 0.0
    memory: float = 0.0
    gpus: int = 0
    disk: float = 0.0
    accelerators: dict[str, int] = Field(default_factory=dict)


class ClusterQueue(StrictModel):
    """A batch cluster's own queue (Slurm): at most ``limit`` of pending requests, of which
    ``queued`` (``jobs`` jobs, anyone's) pend there now. SkyShift may place work there beyond
    the free capacity while there is room, so the cluster never idles between two jobs."""

    limit: NodeResources = Field(default_factory=NodeResources)
    queued: NodeResources = Field(default_factory=NodeResources)
    jobs: int = 0


class TeardownRecord(StrictModel):
    """What a cluster's teardown decided before deleting anything: the job workflows that had
    replicas there (told "deleted") and how many replicas it found. A retried teardown, which
    finds the replicas already gone, reports and tells from this record."""

    jobs: list[str] = Field(default_factory=list)
    replicas: int = 0


class ClusterStatus(StrictModel):
    phase: ClusterPhase = "Init"
    message: str = ""
    capacity: dict[str, NodeResources] = Field(default_factory=dict)
    allocatable: dict[str, NodeResources] = Field(default_factory=dict)
    queue: ClusterQueue | None = None  # batch managers only (Slurm)
    # what the cluster's manager reports about itself (e.g. slurm/partition); placement filters
    # see them beside metadata.labels, which win on a clash
    labels: dict[str, str] = Field(default_factory=dict)
    # the physical cluster the adapter reached (compat.base.cluster_identity); a second Cluster
    # with the same one is held in Error so no capacity is counted twice
    identity: str = ""
    lastHeartbeat: str | None = None
    observedGeneration: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    workflowId: str = ""
    provision: ProvisionStatus | None = None  # provisioned clusters: what the lifecycle did
    teardown: TeardownRecord | None = None  # set while the cluster is deleted


class Cluster(SkyObject):
    KIND: ClassVar[str] = "Cluster"
    PLURAL: ClassVar[str] = "clusters"
    NAMESPACED: ClassVar[bool] = False
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Cluster"] = "Cluster"
    spec: ClusterSpec = Field(default_factory=ClusterSpec)
    status: ClusterStatus = Field(default_factory=ClusterStatus)
