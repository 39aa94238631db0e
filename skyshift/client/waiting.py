"""What ``wait()`` waits for, shared by both clients and ``skyctl wait``.

A wait is "this object reaches phase X" or "this object is gone". The clients read the object
once, then follow the API's watch from that resourceVersion (no polling) until the condition
holds or the deadline passes; a timeout is an :class:`~skyshift.client.errors.ApiError` with
reason ``Timeout`` that says what was awaited and where the object stood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skyshift.client.errors import TIMEOUT, ApiError
from skyshift.client.types import WatchEvent

#: Pause before watching again when a watch stream ended without an event (it normally lasts
#: until its timeout; this keeps a server that closes streams early from being hammered).
WATCH_PAUSE = 0.2

_PHASE = re.compile(r"(?:jsonpath=\{?\.status\.phase\}?|phase)=([A-Za-z]+)", re.IGNORECASE)


@dataclass(frozen=True)
class WaitFor:
    """``phase`` to reach, or ``delete`` (phase is then None)."""

    phase: str | None = None

    @property
    def delete(self) -> bool:
        return self.phase is None

    def __str__(self) -> str:
        return "delete" if self.delete else f"phase={self.phase}"

    def met(self, obj: dict[str, Any] | None) -> bool:
        """Whether ``obj`` (None: the object is gone) satisfies the wait."""
        if obj is None:
            return self.delete
        if self.delete:
            return False
        phase = str((obj.get("status") or {}).get("phase") or "")
        return phase.lower() == str(self.phase).lower()


def parse_for(text: str | WaitFor) -> WaitFor:
    """``phase=Succeeded`` (any phase, case-insensitive) or ``delete``; anything else is a
    ValueError naming the accepted forms."""
    if isinstance(text, WaitFor):
        return text
    value = text.strip()
    if value.lower() == "delete":
        return WaitFor()
    m = _PHASE.fullmatch(value)
    if not m:
        raise ValueError(
            f"cannot wait for {value!r}: use phase=<Phase> (e.g. phase=Succeeded) or delete"
        )
    return WaitFor(m.group(1))


@dataclass
class Follow:
    """A step of a wait: watch the object (``watch_args``: the keyword arguments of the
    client's ``watch``) until :meth:`take` says the wait is decided or the stream ends."""

    watch_args: dict[str, Any]
    cond: WaitFor
    last: dict[str, Any] | None
    seen: bool = False

    def take(self, event: WatchEvent) -> bool:
        """Note one event; True when the wait is decided (met, or the object is gone)."""
        self.seen = True
        if event.type == "DELETED":
            self.last = None
        elif event.type in ("ADDED", "MODIFIED"):
            self.last = event.object
        return self.last is None or self.cond.met(self.last)


@dataclass(frozen=True)
class Pause:
    """A step of a wait: sleep this many seconds before watching again."""

    seconds: float


def phase_of(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return "gone"
    return str((obj.get("status") or {}).get("phase") or "none yet")


def timed_out(what: str, cond: WaitFor, timeout: float, last: dict[str, Any] | None) -> ApiError:
    """The error of a wait that ran out of time, naming where the object stood."""
    where = "it still exists" if cond.delete else f"its phase is {phase_of(last)}"
    return ApiError(
        0,
        TIMEOUT,
        f"timed out after {timeout:g}s waiting for {what} to reach {cond}: {where}"
        if not cond.delete
        else f"timed out after {timeout:g}s waiting for {what} to be deleted: {where}",
    )


def deleted_while_waiting(what: str, cond: WaitFor) -> ApiError:
    return ApiError(404, "NotFound", f"{what} was deleted while waiting for {cond}")
