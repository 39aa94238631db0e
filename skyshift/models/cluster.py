"""Cluster: a Kubernetes, Slurm, Ray, local or cloud cluster SkyShift places work on."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import Condition, StrictModel, not_supported_yet
from skyshift.models.quantity import parse_accelerators, parse_cpus, parse_memory

ClusterPhase = Literal["Init", "Provisioning", "Ready", "Error", "Deleting"]
MANAGER_ALIASES = {"k8": "k8", "k8s": "k8", "kubernetes": "k8", "slurm": "slurm", "local": "local",
                   "ray": "ray"}


NO_PROVISIONING = (
    "cluster provisioning is not implemented; attach an existing cluster "
    "(--config for Kubernetes or Slurm, --host for Slurm over SSH)"
)


class ClusterSpec(StrictModel):
    """How to reach the cluster. ``provision``, ``cloud`` and ``region`` (the original's
    provisioning fields) are refused until provisioning exists, rather than silently ignored."""

    manager: str = "k8"
    cloud: str = ""
    region: str = ""
    cpus: float = 0.0
    memory: float = 0.0
    disk_size: float = 0.0
    accelerators: dict[str, int] = Field(default_factory=dict)
    ports: list[int] = Field(default_factory=list)
    num_nodes: int = Field(default=1, ge=1)
    provision: bool = False
    config_path: str = ""
    context: str = ""
    access_config: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("manager", mode="before")
    @classmethod
    def _manager(cls, v: object) -> str:
        key = str(v).lower()
        if key not in MANAGER_ALIASES:
            raise ValueError(
                f"unknown manager {v!r}: expected local, k8 (kubernetes), slurm or ray"
            )
        return MANAGER_ALIASES[key]

    @field_validator("provision", "cloud", "region")
    @classmethod
    def _provisioning(cls, v: bool | str, info: ValidationInfo) -> bool | str:
        if v:
            raise not_supported_yet(str(info.field_name), NO_PROVISIONING)
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
    def _ray_address(self) -> ClusterSpec:
        """A Ray cluster is reached through its dashboard: refuse one without its URL."""
        if self.manager == "ray":
            address = self.config.get("address")
            if (not isinstance(address, str) or len(address) > 2048
                    or not address.startswith(("http://", "https://"))):
                raise ValueError("config.address: a ray cluster needs its dashboard URL, "
                                 "like http://127.0.0.1:8265 (skyctl: --address)")
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


class ClusterStatus(StrictModel):
    phase: ClusterPhase = "Init"
    message: str = ""
    capacity: dict[str, NodeResources] = Field(default_factory=dict)
    allocatable: dict[str, NodeResources] = Field(default_factory=dict)
    queue: ClusterQueue | None = None  # batch managers only (Slurm)
    # what the cluster's manager reports about itself (e.g. slurm/partition); placement filters
    # see them beside metadata.labels, which win on a clash
    labels: dict[str, str] = Field(default_factory=dict)
    lastHeartbeat: str | None = None
    observedGeneration: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    workflowId: str = ""


class Cluster(SkyObject):
    KIND: ClassVar[str] = "Cluster"
    PLURAL: ClassVar[str] = "clusters"
    NAMESPACED: ClassVar[bool] = False
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Cluster"] = "Cluster"
    spec: ClusterSpec = Field(default_factory=ClusterSpec)
    status: ClusterStatus = Field(default_factory=ClusterStatus)
