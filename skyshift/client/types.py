"""Small result types of the client: watch events, delete, exec and apply outcomes.

Objects themselves stay plain JSON dicts: the client must keep working when the server adds a
field this (older) client's models would reject, and the CLI renders dicts anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ApplyAction = Literal["created", "configured", "unchanged"]


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream: ``ADDED``, ``MODIFIED``, ``DELETED`` (or ``BOOKMARK``)."""

    type: str
    object: dict[str, Any] = field(default_factory=dict)

    @property
    def resource_version(self) -> str | None:
        rv = (self.object.get("metadata") or {}).get("resourceVersion")
        return None if rv is None else str(rv)


@dataclass(frozen=True)
class DeleteResult:
    """``pending`` is true when the server accepted the delete (202) and a lifecycle tears down."""

    status_code: int
    object: dict[str, Any] | None = None

    @property
    def pending(self) -> bool:
        return self.status_code == 202


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class ApplyResult:
    action: ApplyAction
    object: dict[str, Any]
