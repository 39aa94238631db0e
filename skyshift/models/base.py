"""The shape shared by every kind: ``kind``, ``metadata``, ``spec``, ``status``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from skyshift.models.meta import ObjectMeta, StrictModel, dump

API_VERSION = "skyshift.io/v1"


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

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
