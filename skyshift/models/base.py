"""The shape shared by every kind: ``kind``, ``metadata``, ``spec``, ``status``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from skyshift.models.meta import ObjectMeta, StrictModel, dump

API_VERSION = "skyshift.io/v1"
#: The apiVersions a manifest may name (leaving it out means the current one); anything else,
#: e.g. a typo or ``skyshift.io/v999``, is refused rather than read as v1.
API_VERSIONS = (API_VERSION,)

#: An object as the store keeps it and the API serves it: the plain dict of a kind's fields.
Obj = dict[str, Any]


def ns_name(obj: Obj) -> str:
    """``namespace/name`` of a stored object: how the scheduler, the quotas and the watches key
    the jobs they hold."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


class SkyObject(StrictModel):
    """Base of every kind. Subclasses narrow ``spec`` and ``status``."""

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = False
    HAS_LIFECYCLE: ClassVar[bool] = False

    apiVersion: str = API_VERSION
    kind: str
    metadata: ObjectMeta
    spec: Any = Field(default=None)
    status: Any = Field(default=None)

    @field_validator("apiVersion")
    @classmethod
    def _api_version(cls, v: str) -> str:
        if v not in API_VERSIONS:
            raise ValueError(f"apiVersion {v[:80]!r} is not served: use {API_VERSION} "
                             "(or leave apiVersion out)")
        return v

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
