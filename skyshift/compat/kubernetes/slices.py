"""Replicas on linked clusters behind a Kubernetes Service: EndpointSlices SkyShift writes.

The multi-cluster services pattern: the Service keeps selecting this cluster's pods (the
endpointslice controller lists those), and SkyShift adds EndpointSlices of its own, labelled
``kubernetes.io/service-name=<service>`` and ``endpointslice.kubernetes.io/managed-by=
skyshift.io``, that list the addresses of the matching replicas on the clusters the service's
cluster reaches through a Link (``ServiceSpec.remote_backends``). kube-proxy balances over
every slice of the Service, so traffic to the Service reaches them too. On a cluster linked
with the service's primary, the Service is a selector-less copy (``ServiceSpec.linked``) and its
slices list every replica it reaches (``ServiceSpec.backends``: the primary's pods, its own,
those of other clusters it is linked with).

One slice per target port and address family (a slice's ports apply to all its endpoints;
``ipv4-`` / ``fqdn-`` in the name). Addresses Kubernetes refuses in an EndpointSlice (loopback,
link-local, unspecified) are left out, and counted in the service's message. A slice that no
longer has addresses is deleted; ``delete_service`` deletes them all.
"""

from __future__ import annotations

import contextlib
import ipaddress

from skyshift.compat.errors import NotFound
from skyshift.compat.kubernetes import objects as ko
from skyshift.compat.kubernetes.api import Conflict, KubeApi
from skyshift.compat.types import ServiceSpec
from skyshift.models.base import Obj

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SKYSHIFT_MANAGER = "skyshift.io"
CONTROLLER = "endpointslice-controller.k8s.io"  # Kubernetes' own, for Services with a selector
MAX_ENDPOINTS = 1000  # the EndpointSlice API's limit per slice


def family(host: str) -> str | None:
    """"IPv4"/"IPv6"/"FQDN" for a usable endpoint address; None for one Kubernetes refuses."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "FQDN" if host and all(c.isalnum() or c in "-." for c in host) else None
    if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
        return None
    return "IPv4" if ip.version == 4 else "IPv6"


def port_names(spec: ServiceSpec) -> dict[int, str]:
    """Target port -> the Service port name (as ``services.service_manifest``)."""
    return {p.target_port or p.port: f"{p.protocol.lower()}-{p.port}" for p in spec.ports}


def desired_slices(spec: ServiceSpec,
                   addresses: dict[str, list[str]] | None = None) -> tuple[dict[str, Obj], int]:
    """Slice name -> manifest for ``addresses`` (target port -> ``host:port``; default
    ``spec.remote_backends``), and how many addresses were left out."""
    names = port_names(spec)
    protocols = {p.target_port or p.port: p.protocol for p in spec.ports}
    grouped: dict[tuple[str, int, int], list[str]] = {}
    skipped = 0
    wanted = spec.remote_backends if addresses is None else addresses
    for target_text, listed in sorted(wanted.items()):
        target = int(target_text)
        if target not in names:
            continue
        for address in listed:
            host, _, port_text = address.rpartition(":")
            host = host.strip("[]")
            kind = family(host)
            if kind is None or not port_text.isdigit():
                skipped += 1
                continue
            grouped.setdefault((kind, target, int(port_text)), []).append(host)
    out: dict[str, Obj] = {}
    for (kind, target, port), hosts in sorted(grouped.items()):
        name = f"{spec.name}-skyshift-{kind.lower()}-{target}-{port}"[:253]
        out[name] = {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "labels": {
                SERVICE_NAME_LABEL: spec.name, MANAGED_BY: SKYSHIFT_MANAGER,
                ko.MANAGED_BY: "skyshift", ko.NAMESPACE: spec.namespace}},
            "addressType": kind,
            "ports": [{"name": names[target], "port": port, "protocol": protocols[target]}],
            "endpoints": [{"addresses": [h], "conditions": {"ready": True}}
                          for h in sorted(set(hosts))[:MAX_ENDPOINTS]],
        }
    return out, skipped


class KubeSlices:
    """Keeps a Service's SkyShift EndpointSlices (blocking calls: run them in a thread)."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"

    def current(self, service: str) -> dict[str, Obj]:
        selector = f"{SERVICE_NAME_LABEL}={service},{MANAGED_BY}={SKYSHIFT_MANAGER}"
        got = self.api.request("GET", self.path, {"labelSelector": selector},
                               what=f"list endpointslices of {service}")
        return {str(o["metadata"]["name"]): o for o in got.get("items") or []}

    def sync(self, spec: ServiceSpec,
             addresses: dict[str, list[str]] | None = None) -> tuple[int, int]:
        """Make the slices match ``addresses`` (default ``spec.remote_backends``): (addresses
        written, left out)."""
        wanted, skipped = desired_slices(spec, addresses)
        have = self.current(spec.name)
        for name, body in wanted.items():
            old = have.get(name)
            if old is not None and old.get("endpoints") == body["endpoints"] \
                    and old.get("ports") == body["ports"]:
                continue
            if old is None:
                with contextlib.suppress(Conflict):
                    self.api.request("POST", self.path, body=body, what=f"create {name}")
                    continue
                old = self.current(spec.name).get(name) or {}
            body["metadata"]["resourceVersion"] = (old.get("metadata") or {}).get(
                "resourceVersion")
            self.api.request("PUT", f"{self.path}/{name}", body=body, what=f"update {name}")
        for name in set(have) - set(wanted):
            with contextlib.suppress(NotFound):
                self.api.request("DELETE", f"{self.path}/{name}", what=f"delete {name}")
        written = sum(len(b["endpoints"]) for b in wanted.values())
        return written, skipped

    def delete_controllers(self, service: str) -> None:
        """Delete the endpointslice controller's slices of ``service`` (it leaves those of a
        Service that lost its selector in place, and they would list stale pods)."""
        selector = f"{SERVICE_NAME_LABEL}={service},{MANAGED_BY}={CONTROLLER}"
        got = self.api.request("GET", self.path, {"labelSelector": selector},
                               what=f"list endpointslices of {service}")
        for obj in got.get("items") or []:
            name = str(obj["metadata"]["name"])
            with contextlib.suppress(NotFound):
                self.api.request("DELETE", f"{self.path}/{name}", what=f"delete {name}")

    def delete_all(self, service: str) -> None:
        for name in self.current(service):
            with contextlib.suppress(NotFound):
                self.api.request("DELETE", f"{self.path}/{name}", what=f"delete {name}")
