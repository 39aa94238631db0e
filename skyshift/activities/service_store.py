"""Activities of the control task queue for the Service lifecycle: reads and writes in etcd.

Like :mod:`skyshift.activities.store` they are short and idempotent, so the ServiceWorkflow runs
them as local activities: re-read the spec, look at the matching jobs (one label-selected list
of jobs in the namespace plus one list of clusters), write the status, and keep the Endpoints
object of the same name. Nothing is rewritten when it did not change, so an idle service costs
two etcd reads per refresh and no writes.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio import activity

from skyshift.activities.store import read_spec, uid_of, update_status
from skyshift.activities.trust import check_address, check_labels, check_ref, untrusted
from skyshift.contract import activity_names as act
from skyshift.contract.services import (
    EndpointsWrite,
    ReadServiceInput,
    ReadServiceResult,
    ServiceStatusPatch,
    ServiceView,
    ServiceViewInput,
)
from skyshift.lifecycle.service_convert import parse_service, view_of
from skyshift.models.base import Obj
from skyshift.models.meta import now_iso
from skyshift.store import AlreadyExists, NotFound, ObjectStore

#: annotation on an Endpoints object kept by a service: the uid of that service
OWNER = "skyshift.io/service-uid"


def apply_service_patch(obj: Obj, patch: ServiceStatusPatch) -> Obj | None:
    """The status mutation of :class:`ServiceStatusPatch` (None: wrong uid or no change)."""
    if patch.uid and uid_of(obj) != patch.uid:
        return None
    status: dict[str, Any] = obj.setdefault("status", {})
    before = repr(status)
    deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
    if patch.phase is not None and not (deleting and patch.phase != "Deleting"):
        status["phase"] = patch.phase
    fields = {"message": patch.message, "cluster": patch.cluster, "clusterIP": patch.cluster_ip,
              "externalIP": patch.external_ip, "observedGeneration": patch.observed_generation,
              "workflowId": patch.workflow_id}
    for key, value in fields.items():
        if value is not None:
            status[key] = value
    if patch.reachable is not None:
        status["reachable"] = [{"cluster": r.cluster, "clusterIP": r.cluster_ip,
                                "externalIP": r.external_ip, "role": r.role}
                               for r in patch.reachable]
    return obj if repr(status) != before else None


def endpoints_object(w: EndpointsWrite) -> Obj:
    return {
        "apiVersion": "skyshift.io/v1", "kind": "Endpoints",
        "metadata": {"name": w.name, "namespace": w.namespace, "uid": str(uuid.uuid4()),
                     "generation": 1, "annotations": {OWNER: w.service_uid},
                     "creationTimestamp": now_iso()},
        "spec": endpoints_spec(w), "status": {},
    }


def endpoints_spec(w: EndpointsWrite) -> Obj:
    return {
        "selector": dict(w.selector),
        "primary_cluster": w.primary_cluster,
        "endpoints": {
            c: {"num_endpoints": n, "exposed_to_cluster": c == w.primary_cluster or bool(
                w.addresses.get(c)), "addresses": list(w.addresses.get(c, []))}
            for c, n in sorted(w.endpoints.items())
        },
    }


def check_endpoints(w: EndpointsWrite) -> None:
    check_ref(w.name, w.namespace, w.service_uid, "service name")
    check_labels(w.selector, "selector")
    if w.primary_cluster:
        check_ref(w.primary_cluster, what="primary cluster")
    for cluster, addresses in w.addresses.items():
        check_ref(cluster, what="cluster")
        for address in addresses:
            check_address(address, f"addresses[{cluster}]")


class ServiceStoreActivities:
    """Built once in the control worker with its store."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    @activity.defn(name=act.READ_SERVICE)
    async def read_service(self, inp: ReadServiceInput) -> ReadServiceResult:
        return await read_spec(self.store, act.READ_SERVICE, "services", inp, parse_service,
                               ReadServiceResult)

    @activity.defn(name=act.SERVICE_VIEW)
    async def service_view(self, inp: ServiceViewInput) -> ServiceView:
        """Where the jobs matching the selector have replicas placed and running."""
        with untrusted(act.SERVICE_VIEW):
            check_ref('x', inp.namespace)
            check_labels(inp.selector, 'selector')
        jobs: list[Obj] = []
        if inp.selector:
            jobs = (await self.store.list("jobs", inp.namespace,
                                          label_selector=dict(inp.selector))).items
        clusters = (await self.store.list("clusters")).items
        links = (await self.store.list("links")).items
        return view_of(jobs, clusters, inp.selector, links)

    @activity.defn(name=act.WRITE_SERVICE_STATUS)
    async def write_service_status(self, patch: ServiceStatusPatch) -> bool:
        with untrusted(act.WRITE_SERVICE_STATUS):
            check_ref(patch.name, patch.namespace, patch.uid, 'service name')
        return await update_status(self.store, "services", patch.name, patch.namespace,
                                   lambda o: apply_service_patch(o, patch))

    @activity.defn(name=act.WRITE_ENDPOINTS)
    async def write_endpoints(self, w: EndpointsWrite) -> bool:
        """Create or update the service's Endpoints (or remove it). An Endpoints object of the
        same name that some user made (not annotated with this service's uid) is left alone."""
        with untrusted(act.WRITE_ENDPOINTS):
            check_endpoints(w)
        try:
            current = await self.store.get("endpoints", w.name, w.namespace)
        except NotFound:
            current = None
        if current is not None:
            owner = ((current.get("metadata") or {}).get("annotations") or {}).get(OWNER)
            if owner != w.service_uid:
                return False
        if w.remove:
            if current is None:
                return False
            rv = (current.get("metadata") or {}).get("resourceVersion")
            try:
                await self.store.delete("endpoints", w.name, w.namespace, expected_rv=rv)
            except NotFound:
                return False
            return True
        if current is None:
            try:
                await self.store.create("endpoints", endpoints_object(w))
                return True
            except AlreadyExists:
                return False  # someone made it meanwhile: the next refresh looks again
        spec = endpoints_spec(w)

        def mutate(obj: Obj) -> Obj | None:
            owner = ((obj.get("metadata") or {}).get("annotations") or {}).get(OWNER)
            if owner != w.service_uid or obj.get("spec") == spec:
                return None
            obj["spec"] = spec
            return obj

        return await update_status(self.store, "endpoints", w.name, w.namespace, mutate)
