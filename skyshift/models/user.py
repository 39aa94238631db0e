"""User: an account. Kept apart from other kinds; the password is only ever stored hashed."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel


class UserSpec(StrictModel):
    email: str = ""
    passwordHash: str = Field(default="", repr=False)


class User(SkyObject):
    KIND: ClassVar[str] = "User"
    PLURAL: ClassVar[str] = "users"
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["User"] = "User"
    spec: UserSpec = Field(default_factory=UserSpec)
    status: dict[str, str] = Field(default_factory=dict)
