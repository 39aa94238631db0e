"""Compatibility layer: one ClusterManager protocol over local processes, Kubernetes, Slurm,
Ray and SkyPilot, one subpackage per manager.

Everything above compat talks to clusters only through ``ClusterManager`` (built with
``create_manager``), the plain dataclasses in ``types`` and the errors in ``errors``; no vendor
type or exception crosses this boundary. Importing this package adds the built-in managers
(``registry``): their names become valid in ``spec.manager``; their adapters are imported lazily
by ``create_manager``.
"""

from skyshift.compat import registry
from skyshift.compat.base import ClusterManager, create_manager, known_managers, register_manager
from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient, Unsupported
from skyshift.compat.kind import ManagerKind, add_manager, manager_kind
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
    "ManagerKind",
    "NodeState",
    "NotFound",
    "Permanent",
    "ReplicaSpec",
    "ReplicaStatus",
    "Transient",
    "Unsupported",
    "add_manager",
    "create_manager",
    "known_managers",
    "manager_kind",
    "register_manager",
    "registry",
]
