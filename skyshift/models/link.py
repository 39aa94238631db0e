"""Link: how two clusters reach each other (for services that span clusters).

Both ends must be valid, different cluster names; whether those clusters exist is checked by the
API server when the Link is created (``skyshift.api.references``). ``gateway`` is the address
and port the source cluster reaches the target through; without one the clusters reach each
other's replica addresses directly (e.g. two local clusters on one host).

Its lifecycle is the LinkWorkflow (``link/<name>``): status Ready, or Error with why (a cluster
missing or not Ready, the gateway refusing connections from the source cluster), looked at
again every 30 s and at every spec change.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel, validate_name


class LinkGateway(StrictModel):
    address: str = Field(min_length=1, max_length=253)
    port: int = Field(ge=1, le=65535)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if any(c.isspace() or c in "/:@" for c in v):
            raise ValueError(f"gateway address {v!r}: a host name or an IPv4 address")
        return v


class LinkSpec(StrictModel):
    source_cluster: str
    target_cluster: str
    gateway: LinkGateway | None = None

    @field_validator("source_cluster", "target_cluster")
    @classmethod
    def _cluster(cls, v: str) -> str:
        return validate_name(v, "cluster name")

    @model_validator(mode="after")
    def _ends_differ(self) -> LinkSpec:
        if self.source_cluster == self.target_cluster:
            raise ValueError(
                f"source_cluster and target_cluster are both {self.source_cluster!r}: "
                "a link joins two different clusters"
            )
        return self


#: "Active"/"Failed" are what Links stored before they had a lifecycle may still say
LinkPhase = Literal["Init", "Ready", "Error", "Deleting", "Active", "Failed"]


class LinkStatus(StrictModel):
    phase: LinkPhase = "Init"
    message: str = ""
    since: str | None = None  # when phase or message last changed
    observedGeneration: int = 0
    workflowId: str = ""


class Link(SkyObject):
    KIND: ClassVar[str] = "Link"
    PLURAL: ClassVar[str] = "links"
    NAMESPACED: ClassVar[bool] = False
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Link"] = "Link"
    spec: LinkSpec
    status: LinkStatus = Field(default_factory=LinkStatus)
