"""Activities of a cluster's task queue ``skylet-<cluster>`` for services: apply and delete.

They run where the cluster's ClusterManager lives (the skylet manager registers them on each
cluster's worker next to submit/delete) and go through ``compat.services``, so a manager without
services answers ``Unsupported``. Errors map exactly as for replicas
(:func:`skyshift.activities.clusters.compat_errors`): Transient is retried by the caller's retry
policy, Permanent/Unsupported/NotFound become non-retryable ApplicationErrors whose message the
ServiceWorkflow puts in the service's status.

They do not ``connect()`` the manager first: service calls need no replica watch (the Kubernetes
adapter sets up its client on first request), and a manager without services must answer
Unsupported at once even when its cluster is unreachable, instead of being retried as Transient.
"""

from __future__ import annotations

from temporalio import activity

from skyshift.activities.clusters import ClusterContext, compat_errors, heartbeating
from skyshift.activities.trust import (
    check_name,
    check_namespace,
    check_port,
    check_service,
    check_uid,
    untrusted,
)
from skyshift.compat import services
from skyshift.contract import activity_names as act
from skyshift.contract.services import (
    AddressesInput,
    AddressesResult,
    ApplyServiceInput,
    ApplyServiceResult,
    DeleteServiceInput,
)


class ServiceActivities:
    """Service activities of one cluster (built by the skylet manager around its context)."""

    def __init__(self, ctx: ClusterContext) -> None:
        self.ctx = ctx

    @activity.defn(name=act.APPLY_SERVICE)
    async def apply_service(self, inp: ApplyServiceInput) -> ApplyServiceResult:
        with untrusted(act.APPLY_SERVICE):
            check_service(inp.spec)
        with compat_errors():
            status = await heartbeating(services.apply_service(self.ctx.manager, inp.spec))
        return ApplyServiceResult.of(status)

    @activity.defn(name=act.REPLICA_ADDRESSES)
    async def replica_addresses(self, inp: AddressesInput) -> AddressesResult:
        """Where the running replicas of these jobs serve each port on this cluster (nothing
        for a manager that cannot say)."""
        with untrusted(act.REPLICA_ADDRESSES):
            for uid in inp.job_uids:
                check_uid(uid, "job uid")
            for port in inp.ports:
                check_port(port)
        with compat_errors():
            out = AddressesResult()
            for port in inp.ports:
                found = await services.replica_addresses(self.ctx.manager, inp.job_uids, port)
                if found:
                    out.addresses[str(port)] = found
            return out

    @activity.defn(name=act.DELETE_SERVICE)
    async def delete_service(self, inp: DeleteServiceInput) -> None:
        with untrusted(act.DELETE_SERVICE):
            check_name(inp.name, "service name")
            check_namespace(inp.namespace)
        with compat_errors():
            await heartbeating(
                services.delete_service(self.ctx.manager, inp.namespace, inp.name))
