"""Link: a network link between two clusters (for cross-cluster services).

Both ends must be valid, different cluster names; whether those clusters exist is checked by the
API server when the Link is created (``skyshift.api.references``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel, validate_name


class LinkSpec(StrictModel):
    source_cluster: str
    target_cluster: str

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


class LinkStatus(StrictModel):
    phase: Literal["Init", "Active", "Failed"] = "Init"
    message: str = ""


class Link(SkyObject):
    KIND: ClassVar[str] = "Link"
    PLURAL: ClassVar[str] = "links"
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["Link"] = "Link"
    spec: LinkSpec
    status: LinkStatus = Field(default_factory=LinkStatus)
