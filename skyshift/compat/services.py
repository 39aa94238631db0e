"""Service operations of the compat layer, for the managers that have them.

Not every cluster manager has services: Kubernetes does (a v1 Service in front of the pods), a
batch scheduler such as Slurm has no such thing, and the ``local`` manager runs replicas as host
processes that already listen on the host's own ports, so there is nothing to put in front of
them that would honour a service's port mapping or type. So service ops are a separate, smaller
protocol (:class:`ServiceManager`) rather than part of ``ClusterManager``: an adapter that has
services implements it; :func:`apply_service` / :func:`delete_service` call it, and answer
:class:`Unsupported` with a clear message for an adapter that does not (an adapter may also
implement the methods itself to raise a more specific Unsupported, as Slurm does).

Callers (the skylet's service activities) never test for the manager kind themselves.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from skyshift.compat.errors import Unsupported
from skyshift.compat.kind import manager_kind
from skyshift.compat.types import ServiceSpec, ServiceStatus

#: what to tell users of managers without services
ADVICE = "put the service on a Kubernetes cluster (spec.primaryCluster)"


@runtime_checkable
class ServiceManager(Protocol):
    """The service operations an adapter may have (Kubernetes does)."""

    async def apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        """Create the service or bring it in line with ``spec`` (idempotent by name); returns
        its addresses. Raises Permanent for a spec the cluster refuses, Transient when it cannot
        be reached, Unsupported where the manager has no services."""

    async def delete_service(self, namespace: str, name: str) -> None:
        """Remove the service; one that does not exist is fine."""


def unsupported(manager: str) -> Unsupported:
    """The error for a manager without services (its kind named, and what to do instead): the
    manager's own ``no_services`` text where it has one."""
    kind = manager_kind(manager)
    why = (kind.no_services if kind else "") or f"{manager} clusters have no services"
    return Unsupported(f"{why}; {ADVICE}")


def _ops(manager: Any) -> ServiceManager:
    if isinstance(manager, ServiceManager):
        return manager
    raise unsupported(str(getattr(manager, "manager", "this")))


async def apply_service(manager: Any, spec: ServiceSpec) -> ServiceStatus:
    """``manager.apply_service(spec)``, or Unsupported when the manager has no services."""
    return await _ops(manager).apply_service(spec)


async def delete_service(manager: Any, namespace: str, name: str) -> None:
    """``manager.delete_service(...)``, or Unsupported when the manager has no services."""
    await _ops(manager).delete_service(namespace, name)


async def replica_addresses(manager: Any, job_uids: list[str], port: int) -> list[str]:
    """``host:port`` where the running replicas of these jobs serve ``port`` ([] for a manager
    that cannot say: its services select their replicas themselves, as Kubernetes does)."""
    fn = getattr(manager, "replica_addresses", None)
    if fn is None:
        return []
    found: list[str] = await fn(job_uids, port)
    return found
