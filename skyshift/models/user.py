"""User: an account. Kept apart from other kinds; the password is only ever stored hashed.

The e-mail address is optional; when given it must look like one (``name@host.domain``), so a
typo is caught at registration (by ``skyctl register`` before sending, and by this model).

User names are wider than object names, as in the original SkyShift: capitals and ``_`` are
allowed (``john_doe``, ``JohnDoe``), since people pick them, not DNS. They stay safe wherever
they become a key, a URL segment or a log field: letters, digits, ``_`` and ``-`` only (no
``/``, ``.``, spaces or control characters), starting and ending with a letter or digit, at most
63 characters. Names differing only in case are different users.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import ObjectMeta, StrictModel, checked_or_empty

_USER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?")


def validate_user_name(value: str, what: str = "user name") -> str:
    """``value`` unchanged if it is a valid user name; ValueError saying the rule otherwise."""
    if not isinstance(value, str) or not _USER_NAME.fullmatch(value):
        shown = repr(value[:80]) if isinstance(value, str) else type(value).__name__
        raise ValueError(
            f"{what} {shown} is not valid: use letters, digits, '_' and '-', starting and "
            "ending with a letter or digit, at most 63 characters"
        )
    return value


_EMAIL_LOCAL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+$")
_EMAIL_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$")


def email_problem(email: str) -> str | None:
    """Why ``email`` is not an address (None when it is one). Deliberately simple: one '@',
    a plain local part, and a host name with at least one dot."""
    local, at, host = email.rpartition("@")
    if not at or not local or not host:
        return "expected an address like name@example.com"
    if len(email) > 254 or len(local) > 64:
        return "it is too long (at most 64 characters before '@' and 254 in all)"
    if "@" in local or not _EMAIL_LOCAL.fullmatch(local) or ".." in local or local[0] == "." \
            or local[-1] == ".":
        return f"{local!r} is not a valid name before '@'"
    labels = host.split(".")
    if len(labels) < 2 or not all(_EMAIL_HOST_LABEL.fullmatch(label) for label in labels):
        return f"{host!r} is not a valid domain (expected e.g. example.com)"
    return None


def validate_email(email: str) -> str:
    """``email`` unchanged ('' means none given); ValueError naming the problem otherwise."""
    return checked_or_empty(email, email_problem, "e-mail address")


class UserSpec(StrictModel):
    email: str = ""
    passwordHash: str = Field(default="", repr=False)

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return validate_email(v)


class UserMeta(ObjectMeta):
    """A user's metadata: the name follows :func:`validate_user_name`, not DNS-1123."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return validate_user_name(v)


class User(SkyObject):
    KIND: ClassVar[str] = "User"
    PLURAL: ClassVar[str] = "users"
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["User"] = "User"
    metadata: UserMeta
    spec: UserSpec = Field(default_factory=UserSpec)
    status: dict[str, str] = Field(default_factory=dict)
