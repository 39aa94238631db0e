"""The ClusterManager protocol every adapter implements, and the factory that builds adapters.

The skylet worker for a cluster holds one ClusterManager and calls it from activities; nothing
above compat knows which manager is behind it. The contract (idempotent submit keyed by replica
name, one ``replicas()`` call per cluster, only compat errors) is checked for every adapter by
``tests/integration/contract_suite.py``.

Adapters are found by manager name: a manager's descriptor (``compat/kind.py``, one per manager
subpackage, listed in ``compat/registry.py``) names its adapter as ``"module:Class"``, imported
lazily, so building a local cluster never imports the Kubernetes client. ``register_manager``
puts a factory in front of that (tests, or a plugin replacing a built-in adapter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

from skyshift.compat.errors import Permanent
from skyshift.compat.kind import kinds, load, manager_kind
from skyshift.compat.types import ClusterState, ExecResult, ReplicaSpec, ReplicaStatus

log = logging.getLogger(__name__)

#: True while a ``submit`` may repeat one that already sent something (the skylet sets it for a
#: retried activity attempt, whose earlier attempt may have died with a request in flight): a
#: manager that would otherwise look its names up in a listing it made a moment ago lists again.
RESUBMIT: ContextVar[bool] = ContextVar("skyshift_resubmit", default=False)


@runtime_checkable
class ClusterManager(Protocol):
    """One cluster, seen through its manager (local processes, Kubernetes, Slurm, Ray).

    Service operations are not part of this protocol: managers that have services also
    implement ``compat.services.ServiceManager``, and ``compat.services.apply_service`` answers
    Unsupported for the others."""

    name: str
    manager: str  # its manager's name: "local" | "k8" | "slurm" | "ray" | "skypilot" | a plugin

    async def connect(self) -> None:
        """Prepare clients; cheap to call again."""

    async def close(self) -> None:
        """Release clients; replicas keep running."""

    async def state(self) -> ClusterState:
        """Health, nodes, capacity and allocatable. Raises Transient when unreachable."""

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        """Create the replicas. Idempotent: a replica whose name exists is adopted, never
        created twice. Raises Permanent for a spec that can never run, Transient when it cannot
        run right now."""

    async def replicas(self) -> list[ReplicaStatus]:
        """Every SkyShift replica on the cluster, in one call (not one per job)."""

    async def delete(self, names: list[str]) -> None:
        """Stop and remove the named replicas; names that do not exist are fine."""

    async def delete_job(self, job_uid: str) -> list[str]:
        """Stop and remove every replica of a job; returns the names removed."""

    async def logs(self, name: str, tail: int | None = None) -> str:
        """Output of a replica (last ``tail`` lines when given). Raises NotFound."""

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        """Run a command inside a running replica. Raises Unsupported where the manager has
        no such operation, NotFound for an unknown replica."""


async def cluster_identity(manager: ClusterManager) -> str:
    """What physical cluster the adapter reached, as a string two adapters on the same one
    agree on ("k8:kube-system=<uid>", "slurm:<ClusterName>@<controller>", "ray:<session>",
    "local:<host>:<state_dir>"); "" for a manager that cannot tell.

    Optional (``identity()`` on the adapter), so it is not part of the protocol: the skylet
    uses it to refuse a second Cluster object on a cluster another one already has (two names
    for one cluster count its capacity twice). Raises what the adapter's calls raise."""
    identity = getattr(manager, "identity", None)
    if identity is None:
        return ""
    return str(await identity())


async def prepare(manager: ClusterManager) -> None:
    """Optional ``prepare()`` on the adapter: start what its first call needs (a process, an
    import) ahead of it, without calling the cluster. Best effort, so not part of the protocol:
    whatever stops it is the first call's to report."""
    fn = getattr(manager, "prepare", None)
    if fn is None:
        return
    try:
        await fn()
    except Exception:  # the first real call says what is wrong
        log.debug("preparing manager %s failed", getattr(manager, "name", "?"), exc_info=True)


ManagerFactory = Callable[[str, dict[str, Any]], ClusterManager]

_REGISTRY: dict[str, ManagerFactory] = {}


def register_manager(manager: str, factory: ManagerFactory) -> None:
    """Make ``create_manager(..., manager, ...)`` build clusters with ``factory``."""
    _REGISTRY[manager] = factory


def known_managers() -> list[str]:
    return sorted({kind.name for kind in kinds()} | set(_REGISTRY))


def _lookup(manager: str) -> ManagerFactory:
    if manager in _REGISTRY:
        return _REGISTRY[manager]
    kind = manager_kind(manager)
    if kind is None:
        raise Permanent(
            f"unknown cluster manager {manager!r}; known: {', '.join(known_managers())}"
        )
    factory: ManagerFactory = load(kind.adapter)
    _REGISTRY[manager] = factory
    return factory


def create_manager(name: str, manager: str, config: dict[str, Any]) -> ClusterManager:
    """Build the adapter for cluster ``name``. Unknown manager or bad config -> Permanent."""
    return _lookup(manager)(name, dict(config))
