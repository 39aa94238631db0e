"""Compatibility layer: one ClusterManager protocol over local processes, Kubernetes, Slurm
and Ray.

Everything above compat talks to clusters only through ``ClusterManager`` (built with
``create_manager``), the plain dataclasses in ``types`` and the errors in ``errors``; no vendor
type or exception crosses this boundary. Adapters are imported lazily by ``create_manager``.
"""

from skyshift.compat.base import ClusterManager, create_manager, known_managers, register_manager
from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient, Unsupported
from skyshift.compat.types import (
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
)

__all__ = [
    "ClusterManager",
    "ClusterState",
    "CompatError",
    "ExecResult",
    "NodeState",
    "NotFound",
    "Permanent",
    "ReplicaSpec",
    "ReplicaStatus",
    "Transient",
    "Unsupported",
    "create_manager",
    "known_managers",
    "register_manager",
]
