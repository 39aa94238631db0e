"""Endpoints: per cluster, how many replicas match a selector, whether the service reaches
them (``exposed_to_cluster``) and, where the cluster can say, at which addresses (``host:port``,
what a local cluster's HAProxy balances over)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel


class EndpointObject(StrictModel):
    num_endpoints: int = Field(default=0, ge=0)
    exposed_to_cluster: bool = False
    addresses: list[str] = Field(default_factory=list)


class EndpointsSpec(StrictModel):
    selector: dict[str, str] = Field(default_factory=dict)
    primary_cluster: str = ""
    endpoints: dict[str, EndpointObject] = Field(default_factory=dict)


class Endpoints(SkyObject):
    KIND: ClassVar[str] = "Endpoints"
    PLURAL: ClassVar[str] = "endpoints"
    NAMESPACED: ClassVar[bool] = True

    kind: Literal["Endpoints"] = "Endpoints"
    spec: EndpointsSpec = Field(default_factory=EndpointsSpec)
    status: dict[str, str] = Field(default_factory=dict)
