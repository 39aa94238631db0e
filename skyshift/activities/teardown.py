"""Deleting a cluster that does not answer: how long the teardown keeps trying, what it says.

A user detaches a cluster (``skyctl delete cluster X``) and then shuts it down, or deletes one
that is already gone. The teardown cannot delete replicas it cannot reach; retrying until its
schedule-to-close timeout (60 s) only keeps the Cluster object, and the jobs that ran there
waiting. So each attempt bounds its cluster calls (``call_timeout``, a hanging connect
included), and once the cluster has been unreachable for ``give_up_after`` (counted from the
first failure the sync loop or a teardown attempt saw, so a cluster already lost gives up at
the first failed call) the teardown ends: the jobs it knows had replicas there are told
"deleted" (they move elsewhere), the Cluster's status says that replicas may be left on it, and
the Cluster workflow removes the object. Attaching the cluster again removes those leftovers
(its first sync round sweeps replicas of jobs not placed there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from skyshift.contract.jobs import UNREACHABLE


@dataclass
class TeardownConfig:
    call_timeout: float = 5.0  # one attempt's connect and listing
    give_up_after: float = 5.0  # unreachable this long: give up (the sync's lost_after)

    def bounds(self, manager: object) -> tuple[float, float]:
        """(call timeout, give up after) for ``manager``: more for one whose listing is slow by
        nature (``sync_timeout``: SkyPilot's queue takes seconds even when all is well), never
        giving up in less than two slow calls. The sync loop uses the same bounds."""
        slow = float(getattr(manager, "sync_timeout", 0.0) or 0.0)
        return max(self.call_timeout, slow), max(self.give_up_after, 2 * slow)


class Downtime:
    """Since when a cluster has been failing to answer (None while it answers)."""

    def __init__(self) -> None:
        self.since: float | None = None

    def failed(self, started: float) -> float:
        """Record a call started at ``started`` (time.monotonic()) that failed; returns the
        seconds since the first failing call started (a call that hung until its timeout
        counts whole)."""
        if self.since is None or started < self.since:
            self.since = started
        return time.monotonic() - self.since

    def answered(self) -> None:
        self.since = None


def unreachable_message(cluster: str, why: str) -> str:
    return (
        f"{UNREACHABLE}: cluster {cluster} was deleted while unreachable ({why}); "
        f"replicas may be left running on it (attaching it again removes them); "
        f"the jobs placed there were told to move elsewhere"
    )


def with_message(obj: dict[str, Any], msg: str) -> dict[str, Any]:
    """Status mutation: the Cluster's message (what ``skyctl get cluster`` shows until the
    object is removed)."""
    obj.setdefault("status", {})["message"] = msg
    return obj
