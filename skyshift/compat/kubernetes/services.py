"""SkyShift services as Kubernetes v1 Services (the service half of the ``k8`` adapter).

Kept apart from ``kubernetes`` so the pod/Deployment code stays readable: this module holds the
pure conversions (ServiceSpec -> Service manifest, Service -> ServiceStatus), unit-tested without
a cluster, and :class:`KubeServices`, the mixin ``KubernetesManager`` inherits its
``apply_service`` / ``delete_service`` from.

Mapping:

* name: the SkyShift service name, in the adapter's one Kubernetes namespace (where every replica
  lives). Services of two SkyShift namespaces with the same name cannot share a cluster: the
  second is refused (Permanent) rather than silently taking over the first.
* selector: the service's selector plus ``skyshift.io/managed-by=skyshift`` and
  ``skyshift.io/namespace=<ns>``, so it selects only SkyShift pods of its own namespace (job
  labels are copied onto every pod, see ``objects.replica_labels``).
* a linked copy (``ServiceSpec.linked``: the service on a cluster linked with its primary) has
  no selector; every address it fronts is in SkyShift's EndpointSlices (``slices``).
* ports: ``port``/``targetPort``/``protocol``, and ``nodePort`` for NodePort and LoadBalancer.
* apply is idempotent by name: create, or replace the spec of the existing Service while keeping
  what Kubernetes allocated (clusterIP, node ports of unchanged ports).
* status: ``spec.clusterIP``; external address from the LoadBalancer ingress (IP or hostname),
  else the first of ``spec.externalIPs``.
"""

from __future__ import annotations

import asyncio
import contextlib

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.api import Conflict, KubeApi, KubeSettings
from skyshift.compat.kubernetes.slices import KubeSlices
from skyshift.compat.types import SERVICE_TYPES, ServicePort, ServiceSpec, ServiceStatus
from skyshift.models.base import Obj

SERVICE_NAME = "skyshift.io/service"
SERVICE_UID = "skyshift.io/service-uid"
LINKED = "skyshift.io/linked"  # on a selector-less copy on a cluster linked with the primary


def service_selector(spec: ServiceSpec) -> dict[str, str]:
    return {**spec.selector, ko.MANAGED_BY: "skyshift", ko.NAMESPACE: spec.namespace}


def check_spec(cluster: str, spec: ServiceSpec) -> None:
    """Permanent for what Kubernetes would refuse anyway, with a clearer message."""
    if spec.type not in SERVICE_TYPES:
        raise Permanent(f"service type {spec.type!r} is not one of {', '.join(SERVICE_TYPES)}")
    if not spec.ports:
        raise Permanent(
            f"kubernetes cluster {cluster}: service {spec.name} needs at least one port"
        )


def service_manifest(spec: ServiceSpec, current: Obj | None = None) -> Obj:
    """The v1 Service for ``spec``; with ``current`` (the existing object), a replacement that
    keeps its resourceVersion, clusterIP and the node ports of ports that did not change."""
    old_ports = {
        (int(p.get("port") or 0), str(p.get("protocol") or "TCP")): p
        for p in ((current or {}).get("spec") or {}).get("ports") or []
    }
    ports = []
    for p in spec.ports:
        port: Obj = {
            "name": f"{p.protocol.lower()}-{p.port}",
            "port": p.port,
            "targetPort": p.target_port or p.port,
            "protocol": p.protocol,
        }
        if spec.type != "ClusterIP":
            kept = old_ports.get((p.port, p.protocol), {}).get("nodePort")
            if p.node_port or kept:
                port["nodePort"] = p.node_port or kept
        ports.append(port)
    body: Obj = {"type": spec.type, "ports": ports}
    if not spec.linked:  # a linked copy selects nothing: its EndpointSlices are SkyShift's
        body["selector"] = service_selector(spec)
    cur_spec = (current or {}).get("spec") or {}
    if spec.cluster_ip or cur_spec.get("clusterIP"):
        body["clusterIP"] = spec.cluster_ip or cur_spec["clusterIP"]
    labels = {ko.MANAGED_BY: "skyshift", ko.NAMESPACE: spec.namespace, SERVICE_NAME: spec.name}
    if spec.uid:
        labels[SERVICE_UID] = spec.uid
    if spec.linked:
        labels[LINKED] = "true"
    meta: Obj = {"name": spec.name, "labels": labels}
    if current is not None:
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body}


def service_status(obj: Obj) -> ServiceStatus:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    labels = meta.get("labels") or {}
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = next((str(i.get("ip") or i.get("hostname")) for i in ingress
                     if i.get("ip") or i.get("hostname")), "")
    if not external and spec.get("externalIPs"):
        external = str(spec["externalIPs"][0])
    cluster_ip = str(spec.get("clusterIP") or "")
    return ServiceStatus(
        name=str(labels.get(SERVICE_NAME) or meta.get("name") or ""),
        namespace=str(labels.get(ko.NAMESPACE) or ""),
        cluster_ip="" if cluster_ip == "None" else cluster_ip,
        external_ip=external,
        ports=[
            ServicePort(int(p.get("port") or 0),
                        int(p["targetPort"]) if isinstance(p.get("targetPort"), int) else 0,
                        int(p.get("nodePort") or 0), str(p.get("protocol") or "TCP"))
            for p in spec.get("ports") or []
        ],
        message="waiting for a load balancer address"
        if spec.get("type") == "LoadBalancer" and not external else "",
    )


def owner_namespace(obj: Obj) -> str | None:
    """The SkyShift namespace of a Service SkyShift made (None: not made by SkyShift)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(ko.MANAGED_BY) != "skyshift":
        return None
    return str(labels.get(ko.NAMESPACE) or "")


class KubeServices:
    """``apply_service`` / ``delete_service`` / ``replica_addresses`` of ``KubernetesManager``
    (mixed in)."""

    name: str
    api: KubeApi
    settings: KubeSettings

    def _ensure_namespace(self) -> None:  # provided by KubernetesManager
        raise NotImplementedError

    @property
    def _services(self) -> str:
        return f"/api/v1/namespaces/{self.settings.namespace}/services"

    async def apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        check_spec(self.name, spec)
        return await asyncio.to_thread(self._apply_service, spec)

    async def delete_service(self, namespace: str, name: str) -> None:
        await asyncio.to_thread(self._delete_service, namespace, name)

    async def replica_addresses(self, job_uids: list[str], port: int) -> list[str]:
        """``podIP:port`` of the running pods of these jobs."""
        if not job_uids:
            return []
        return await asyncio.to_thread(self._replica_addresses, job_uids, port)

    def _replica_addresses(self, job_uids: list[str], port: int) -> list[str]:
        selector = f"{ko.JOB_UID} in ({','.join(sorted(set(job_uids)))})"
        got = self.api.request("GET", f"/api/v1/namespaces/{self.settings.namespace}/pods",
                               {"labelSelector": selector}, what="list pods for addresses")
        out = set()
        for pod in got.get("items") or []:
            status = pod.get("status") or {}
            if status.get("phase") == "Running" and status.get("podIP"):
                out.add(f"{status['podIP']}:{port}")
        return sorted(out)

    def _get_service(self, name: str) -> Obj | None:
        try:
            obj: Obj = self.api.request("GET", f"{self._services}/{name}",
                                        what=f"get service {name}")
            return obj
        except NotFound:
            return None

    def _check_service_owner(self, spec: ServiceSpec, current: Obj) -> None:
        owner = owner_namespace(current)
        if owner != spec.namespace:
            who = f"SkyShift namespace {owner}" if owner else "something not made by SkyShift"
            raise Permanent(
                f"kubernetes cluster {self.name}: service name {spec.name} in namespace "
                f"{self.settings.namespace} is taken by {who}"
            )

    def _apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        status = self._apply_v1_service(spec)
        slices = KubeSlices(self.api, self.settings.namespace)
        if spec.linked:
            # every address it fronts is in slices of its own; the endpointslice controller's,
            # left from when this was the primary's Service with a selector, are stale
            slices.delete_controllers(spec.name)
            written, skipped = slices.sync(spec, spec.backends)
            status.needs_backends = True
            where = "replica addresses (EndpointSlices; a copy of the service on a linked cluster)"
        else:
            written, skipped = slices.sync(spec, spec.remote_backends)
            status.needs_remote = True
            where = "replica addresses on linked clusters added (EndpointSlices)"
        if written or skipped or spec.linked:
            note = f"{written} {where}"
            if skipped:
                note += f"; {skipped} left out (not routable from Kubernetes: loopback or " \
                    "link-local)"
            status.message = f"{status.message}; {note}" if status.message else note
        return status

    def _apply_v1_service(self, spec: ServiceSpec) -> ServiceStatus:
        self._ensure_namespace()
        what = f"apply service {spec.name}"
        current = self._get_service(spec.name)
        if current is None:
            try:
                created = self.api.request("POST", self._services, body=service_manifest(spec),
                                           what=what)
                return service_status(created)
            except Conflict:  # created meanwhile (a retried call): replace it below
                current = self._get_service(spec.name)
                if current is None:
                    raise
        self._check_service_owner(spec, current)
        # 409 here means the object changed since it was read: retry the whole apply (re-read)
        try:
            replaced = self.api.request("PUT", f"{self._services}/{spec.name}",
                                        body=service_manifest(spec, current), what=what)
        except Conflict as exc:
            raise Transient(f"{what}: changed concurrently, retrying") from exc
        return service_status(replaced)

    def _delete_service(self, namespace: str, name: str) -> None:
        current = self._get_service(name)
        if current is None or owner_namespace(current) != namespace:
            return  # gone already, or not ours to delete
        KubeSlices(self.api, self.settings.namespace).delete_all(name)
        with contextlib.suppress(NotFound):
            self.api.request("DELETE", f"{self._services}/{name}", what=f"delete service {name}")
