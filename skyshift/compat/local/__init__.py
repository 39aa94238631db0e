"""The ``local`` cluster manager: replicas run as processes on this host (``adapter.py``).

``MANAGER`` is what the manager is (see ``compat/kind.py``); the adapter is imported only when a
local cluster is built."""

from skyshift.compat.kind import ManagerKind, Obj
from skyshift.models.managers import ManagerNames


def _fill(spec: Obj, status: Obj) -> Obj:
    """The declared capacity (``spec.cpus/memory/accelerators``) caps what the host offers."""
    return {key: spec.get(key) for key in ("cpus", "memory", "accelerators")}


MANAGER = ManagerKind(
    names=ManagerNames("local"),
    adapter="skyshift.compat.local.adapter:LocalManager",
    fill=_fill,
    no_services="this local cluster has no services",
)
