"""Link: a network link between two clusters (for cross-cluster services)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel


class LinkSpec(StrictModel):
    source_cluster: str
    target_cluster: str


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
