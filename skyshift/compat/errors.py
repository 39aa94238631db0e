"""The compat layer's own errors: the only exceptions that leave an adapter.

Workflows and activities decide retry behaviour from these types alone (``Transient`` is retried
with backoff, everything else ends the attempt with a clear message), so no code above compat ever
has to recognise a Kubernetes ``ApiException``, a Slurm exit status or an ``OSError``. Adapters
raise these with the vendor error chained (``raise Transient(...) from exc``) so the cause stays
visible in logs and the Temporal UI.
"""

from __future__ import annotations

from typing import ClassVar

from skyshift.compat.types import RUNNING, ReplicaStatus


class CompatError(Exception):
    """Base of every error an adapter raises."""

    retryable: ClassVar[bool] = False


class Transient(CompatError):
    """Worth retrying: the cluster is unreachable, busy, timed out or momentarily full."""

    retryable = True


class Permanent(CompatError):
    """Retrying the same call cannot help: invalid spec, forbidden, never fits, bad config."""


class NotFound(CompatError):
    """The named replica (or other object) does not exist on the cluster."""


class Unsupported(Permanent):
    """The cluster manager has no such operation (for example exec on a batch scheduler)."""


def not_running(name: str, state: str) -> Permanent:
    """What exec answers for replica ``name`` while it is ``state`` (pending, finished...)."""
    return Permanent(f"replica {name} is {state}; exec needs a running replica")


def require_running(name: str, status: ReplicaStatus) -> None:
    """Exec's precondition, the same on every cluster manager: the replica runs."""
    if status.state != RUNNING:
        raise not_running(name, status.state)
