"""Job: containers to run somewhere in the super-cluster (a superset of the original's spec)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.envs import validate_env_name, validate_env_total, validate_env_value
from skyshift.models.image import ImageRef
from skyshift.models.meta import (
    ArgvStr,
    Condition,
    LabelFilter,
    StrictModel,
    not_supported_yet,
)
from skyshift.models.quantity import Resources, parse_accelerators, parse_cpus, parse_memory

JobPhase = Literal["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Deleting"]
TERMINAL_PHASES = ("Succeeded", "Failed")
RestartPolicy = Literal["Always", "OnFailure", "Never"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


MAX_CPUS = 1_000_000  # per replica: far above any node, low enough to print in a reason
#: the least CPU a replica is counted for (100m, what kube-scheduler assumes for a pod that
#: requests none): every replica is a process that uses some, and a request of 0 was never
#: counted against a cluster (issue 26: 50 replicas of ``cpus: 0`` placed on a 2-CPU cluster)
MIN_CPUS = 0.1
MAX_MEMORY_MB = 1_000_000_000  # a petabyte
MAX_DEVICES = 100_000  # gpus or accelerators of one type
MAX_PRIORITY = 1_000_000_000  # Kubernetes' range for user-defined priority classes


class ResourceRequest(StrictModel):
    """Per-replica request. cpus: cores or millicores ('500m'); memory: MB or '4Gi'. Bounded so
    that a number no cluster could hold fails here, not as a 300-digit reason or a 64-bit
    overflow in a cluster's API."""

    cpus: float = Field(default=1.0, le=MAX_CPUS)
    memory: float = Field(default=0.0, le=MAX_MEMORY_MB)
    gpus: int = Field(default=0, ge=0, le=MAX_DEVICES)
    accelerators: dict[str, Annotated[int, Field(le=MAX_DEVICES)]] = Field(default_factory=dict)

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, v: object) -> float:
        return parse_cpus(v)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: object) -> float:
        return parse_memory(v)

    @field_validator("accelerators", mode="before")
    @classmethod
    def _acc(cls, v: object) -> dict[str, int]:
        return parse_accelerators(v)

    def to_resources(self) -> Resources:
        """What a replica is counted for everywhere (placement, a cluster's used capacity, the
        request a manager is given): the request, with at least ``MIN_CPUS`` CPU."""
        cpus = max(self.cpus, MIN_CPUS)
        return Resources(cpus, self.memory, self.gpus, dict(self.accelerators))


#: A label every cluster has for placement, whose value is the cluster's name: a job is pinned
#: to a cluster with the filter ``matchLabels: {skyshift.io/cluster: NAME}`` (what
#: ``skyctl create job --cluster NAME`` writes). The scheduler adds it to the labels it matches
#: and it outranks a label of the same key set by hand, so it always names the cluster.
CLUSTER_NAME_LABEL = "skyshift.io/cluster"


def placement_labels(cluster: str, labels: dict[str, str]) -> dict[str, str]:
    """The labels a placement filter sees on ``cluster``: its own plus the name label."""
    return {**labels, CLUSTER_NAME_LABEL: cluster}


class Preference(LabelFilter):
    weight: int = Field(default=1, ge=1, le=100)


class Placement(StrictModel):
    """A cluster passes if it matches ANY filter (none = all pass); preferences rank passers."""

    filters: list[LabelFilter] = Field(default_factory=list)
    preferences: list[Preference] = Field(default_factory=list)


EnvName = Annotated[str, AfterValidator(validate_env_name)]
EnvValue = Annotated[str, AfterValidator(validate_env_value)]


class JobSpec(StrictModel):
    """What to run. ``volumes`` and ``imagePullPolicy`` are refused until a cluster manager
    honours them (accepting and ignoring them would mislead); they are kept as fields so the
    error names them instead of calling them unknown."""

    image: ImageRef = "ubuntu:22.04"
    imagePullPolicy: Any = Field(default=None, exclude=True)
    run: ArgvStr = ""  # every manager runs it as an argument of /bin/sh -c
    envs: dict[EnvName, EnvValue] = Field(default_factory=dict)
    ports: list[int] = Field(default_factory=list)
    resources: ResourceRequest = Field(default_factory=ResourceRequest)
    replicas: int = Field(default=1, ge=0, le=10_000)
    restartPolicy: RestartPolicy = "OnFailure"
    maxRestarts: int = Field(default=3, ge=0, le=1_000_000)
    placement: Placement = Field(default_factory=Placement)
    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    # whether a pending job may evict lower-priority ones to fit (docs/preemption.md)
    preemptionPolicy: PreemptionPolicy = "PreemptLowerPriority"
    volumes: Any = Field(default=None, exclude=True)

    @field_validator("imagePullPolicy")
    @classmethod
    def _pull_policy(cls, v: Any) -> None:
        if v is not None:
            raise not_supported_yet(
                "imagePullPolicy", "images are pulled as each cluster's manager is configured "
                "(Kubernetes: the cluster's image_pull_policy setting)"
            )
        return None

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: Any) -> None:
        if v not in (None, []):
            raise not_supported_yet("volumes", "no cluster manager mounts them yet")
        return None

    @field_validator("ports")
    @classmethod
    def _ports(cls, v: list[int]) -> list[int]:
        for p in v:
            if not 1 <= p <= 65535:
                raise ValueError(f"port {p} is out of range 1-65535")
        return v

    @field_validator("envs", mode="before")
    @classmethod
    def _envs(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(val) for k, val in v.items()}
        return v

    @field_validator("envs")
    @classmethod
    def _envs_total(cls, v: dict[str, str]) -> dict[str, str]:
        return validate_env_total(v)


class ReplicaCounts(StrictModel):
    Pending: int = 0
    Running: int = 0
    Succeeded: int = 0
    Failed: int = 0
    Unknown: int = 0


class PlacementDecision(StrictModel):
    """The scheduler's answer to one placement request of the job's workflow (its ``seq``),
    recorded in etcd before the job is told. A scheduler round retried after a crash or a
    Temporal restart finds it and repeats it instead of deciding again from newer capacity: the
    job workflow takes the first answer to a request, so a second, different one would leave
    etcd naming a cluster the replicas never went to."""

    seq: int = 0
    assignments: dict[str, int] = Field(default_factory=dict)
    message: str = ""


class JobStatus(StrictModel):
    phase: JobPhase = "Pending"
    message: str = ""
    placement: dict[str, int] = Field(default_factory=dict)
    placementDecision: PlacementDecision | None = None
    replicaStatus: dict[str, ReplicaCounts] = Field(default_factory=dict)
    restarts: int = 0
    schedulerReasons: dict[str, str] = Field(default_factory=dict)
    preempting: list[str] = Field(default_factory=list)  # jobs evicted for this one ("ns/name")
    observedGeneration: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    startTime: str | None = None
    completionTime: str | None = None
    workflowId: str = ""


class Job(SkyObject):
    KIND: ClassVar[str] = "Job"
    PLURAL: ClassVar[str] = "jobs"
    NAMESPACED: ClassVar[bool] = True
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Job"] = "Job"
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)

    @model_validator(mode="after")
    def _check(self) -> Job:
        if self.spec.restartPolicy == "Always" and self.spec.maxRestarts == 0:
            # Always with no restarts allowed would contradict itself; keep the policy honest.
            raise ValueError("spec.maxRestarts must be > 0 when restartPolicy is Always")
        return self
