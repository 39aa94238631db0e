"""FilterPolicy: keep a namespace's (labelled) jobs on, or off, named clusters."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel


class ClusterFilter(StrictModel):
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class FilterPolicySpec(StrictModel):
    clusterFilter: ClusterFilter = Field(default_factory=ClusterFilter)
    labelsSelector: dict[str, str] = Field(default_factory=dict)


class FilterPolicy(SkyObject):
    KIND: ClassVar[str] = "FilterPolicy"
    PLURAL: ClassVar[str] = "filterpolicies"
    NAMESPACED: ClassVar[bool] = True

    kind: Literal["FilterPolicy"] = "FilterPolicy"
    spec: FilterPolicySpec = Field(default_factory=FilterPolicySpec)
    status: dict[str, str] = Field(default_factory=dict)
