"""Namespace: the unit of isolation for namespaced kinds; ``default`` always exists."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel


class NamespaceStatus(StrictModel):
    phase: Literal["Active", "Terminating"] = "Active"


class Namespace(SkyObject):
    KIND: ClassVar[str] = "Namespace"
    PLURAL: ClassVar[str] = "namespaces"
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["Namespace"] = "Namespace"
    spec: dict[str, str] = Field(default_factory=dict)
    status: NamespaceStatus = Field(default_factory=NamespaceStatus)
