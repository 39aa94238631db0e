"""Service: a stable address for replicas selected by labels, with a primary cluster.

Its lifecycle is the ServiceWorkflow (``skyshift.workflows.service``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import Condition, StrictModel, validate_labels


class ServicePort(StrictModel):
    port: int = Field(ge=1, le=65535)
    targetPort: int | None = Field(default=None, ge=1, le=65535)
    nodePort: int | None = Field(default=None, ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class ServiceSpec(StrictModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    selector: dict[str, str] = Field(default_factory=dict)
    ports: list[ServicePort] = Field(default_factory=list)
    clusterIP: str = ""
    primaryCluster: str = ""

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: dict[str, str]) -> dict[str, str]:
        return validate_labels(v)


class ServiceReach(StrictModel):
    """A cluster the service is reachable on, at which address: its primary cluster, or one
    linked with it, which has a selector-less copy (``role: linked``)."""

    cluster: str
    clusterIP: str = ""
    externalIP: str = ""
    role: Literal["primary", "linked"] = "primary"


ServicePhase = Literal["Pending", "Ready", "Failed", "Deleting"]


class ServiceStatus(StrictModel):
    """Written by the ServiceWorkflow: ``cluster`` is the primary cluster it was applied to;
    ``reachable`` every cluster it is on (the primary first, then the linked ones)."""

    phase: ServicePhase = "Pending"
    externalIP: str = ""
    clusterIP: str = ""
    cluster: str = ""
    message: str = ""
    observedGeneration: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    workflowId: str = ""
    reachable: list[ServiceReach] = Field(default_factory=list)


class Service(SkyObject):
    KIND: ClassVar[str] = "Service"
    PLURAL: ClassVar[str] = "services"
    NAMESPACED: ClassVar[bool] = True
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Service"] = "Service"
    spec: ServiceSpec = Field(default_factory=ServiceSpec)
    status: ServiceStatus = Field(default_factory=ServiceStatus)
