"""Role: which users may do which actions on which resources in which namespaces."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel

ACTIONS = ("create", "get", "list", "update", "patch", "delete", "watch", "*")


class Rule(StrictModel):
    resources: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)

    @field_validator("actions")
    @classmethod
    def _actions(cls, v: list[str]) -> list[str]:
        for a in v:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}: expected one of {', '.join(ACTIONS)}")
        return v


class RoleSpec(StrictModel):
    rules: list[Rule] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)


class Role(SkyObject):
    KIND: ClassVar[str] = "Role"
    PLURAL: ClassVar[str] = "roles"
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["Role"] = "Role"
    spec: RoleSpec = Field(default_factory=RoleSpec)
    status: dict[str, str] = Field(default_factory=dict)
