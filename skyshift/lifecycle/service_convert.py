"""Service manifests -> lifecycle payloads, and the pure rules of the Service lifecycle.

Pure functions (no I/O, no Temporal), shared by the API-side starter, the reconciler, the store
activities and the ServiceWorkflow, and unit-tested on their own: how a stored Service becomes a
``ServiceInput``, which jobs a selector matches, what they add up to per cluster, and which
cluster is the primary one.
"""

from __future__ import annotations

from pydantic import ValidationError

from skyshift.compat.types import ServicePort, ServiceSpec
from skyshift.contract.services import ServiceConfig, ServiceInput, ServiceTemplate, ServiceView
from skyshift.lifecycle.convert import identity, validation_summary
from skyshift.models.base import Obj
from skyshift.models.job import TERMINAL_PHASES
from skyshift.models.service import Service


def parse_service(obj: Obj) -> tuple[ServiceTemplate | None, str]:
    """(template, "") for a valid Service manifest, (None, why) for one that can never work."""
    try:
        svc = Service.model_validate(obj)
    except ValidationError as exc:
        return None, f"invalid service spec: {validation_summary(exc)}"
    spec = svc.spec
    return ServiceTemplate(
        type=spec.type,
        selector=dict(spec.selector),
        ports=[ServicePort(p.port, p.targetPort or 0, p.nodePort or 0, p.protocol)
               for p in spec.ports],
        cluster_ip=spec.clusterIP,
        primary_cluster=spec.primaryCluster,
    ), ""


def service_input(obj: Obj, config: ServiceConfig | None = None) -> ServiceInput:
    meta = obj.get("metadata") or {}
    template, invalid = parse_service(obj)
    return ServiceInput(
        **identity(obj),
        template=template,
        invalid=invalid,
        deleting=bool(meta.get("deletionTimestamp")),
        config=config or ServiceConfig(),
    )


def compat_spec(inp: ServiceInput, t: ServiceTemplate,
                backends: dict[str, list[str]] | None = None,
                remote: dict[str, list[str]] | None = None) -> ServiceSpec:
    return ServiceSpec(
        name=inp.name, namespace=inp.namespace, uid=inp.uid, type=t.type,
        selector=dict(t.selector), ports=list(t.ports), cluster_ip=t.cluster_ip,
        backends=dict(backends or {}), remote_backends=dict(remote or {}),
    )


def linked_spec(inp: ServiceInput, t: ServiceTemplate,
                backends: dict[str, list[str]]) -> ServiceSpec:
    """The copy of the service on a cluster linked with its primary: same name and ports, no
    selector of its own, in front of ``backends``; always ClusterIP (it gives that cluster's
    workloads an address; exposing the service outside is the primary's business) and with an
    address that cluster allocates (a requested clusterIP belongs to the primary's range)."""
    return ServiceSpec(
        name=inp.name, namespace=inp.namespace, uid=inp.uid, type="ClusterIP",
        selector=dict(t.selector), ports=[ServicePort(p.port, p.target_port, 0, p.protocol)
                                          for p in t.ports],
        backends=dict(backends), linked=True,
    )


def linked_clusters(view: ServiceView, primary: str) -> list[str]:
    """The clusters a service on ``primary`` also goes on: those a Ready direct Link joins
    with it, in either direction (a Link says the two clusters reach each other), that
    exist."""
    return sorted(c for c in view.peers.get(primary, []) if c != primary and c in view.clusters)


def reached(view: ServiceView, cluster: str, span: list[str]) -> list[str]:
    """Of the clusters the service spans, those whose replicas the service on ``cluster``
    balances over: itself and those a Ready direct Link joins with it (links are not
    transitive: two clusters linked with the primary need a Link of their own to reach each
    other)."""
    return [c for c in span if c == cluster or c in view.peers.get(cluster, [])]


def merge_addresses(found: dict[str, dict[str, list[str]]],
                    clusters: list[str]) -> dict[str, list[str]]:
    """Target port -> every address the given clusters serve it at (sorted, no repeats)."""
    out: dict[str, set[str]] = {}
    for cluster in clusters:
        for port, addresses in (found.get(cluster) or {}).items():
            out.setdefault(port, set()).update(addresses)
    return {p: sorted(v) for p, v in sorted(out.items())}


def target_ports(t: ServiceTemplate) -> list[int]:
    return sorted({p.target_port or p.port for p in t.ports})


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A job matches when its labels include every selector pair; an empty selector matches
    nothing (a service in front of every job of a namespace is never what was meant)."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def view_of(jobs: list[Obj], clusters: list[Obj], selector: dict[str, str],
            links: list[Obj] | None = None) -> ServiceView:
    """Per cluster, the matching jobs' placed and running replicas (from their status), and
    which clusters each one reaches through a Ready Link."""
    view = ServiceView(clusters={
        str((c.get("metadata") or {}).get("name")): str((c.get("status") or {}).get("phase")
                                                        or "Init")
        for c in clusters
    })
    for link in links or []:
        spec, status = link.get("spec") or {}, link.get("status") or {}
        if status.get("phase") == "Ready" and not spec.get("gateway"):
            source, target = str(spec.get("source_cluster")), str(spec.get("target_cluster"))
            view.links.setdefault(source, []).append(target)
            if source != target:
                view.peers.setdefault(source, []).append(target)
                view.peers.setdefault(target, []).append(source)
    for job in jobs:
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        if meta.get("deletionTimestamp") or not selects(selector, meta.get("labels") or {}):
            continue
        if status.get("phase") in TERMINAL_PHASES:
            continue
        view.jobs += 1
        for cluster, n in (status.get("placement") or {}).items():
            if n:
                view.placed[cluster] = view.placed.get(cluster, 0) + int(n)
        for cluster, counts in (status.get("replicaStatus") or {}).items():
            running = int((counts or {}).get("Running") or 0)
            if running:
                view.running[cluster] = view.running.get(cluster, 0) + running
                view.job_uids.setdefault(cluster, []).append(str(meta.get("uid") or ""))
    for targets in (*view.links.values(), *view.peers.values()):
        targets[:] = sorted(set(targets))
    return view


def choose_primary(t: ServiceTemplate, view: ServiceView, current: str) -> str:
    """spec.primaryCluster when set; else stay where the service is while matching replicas
    are still placed there; else the cluster with most placed replicas (ties: by name)."""
    if t.primary_cluster:
        return t.primary_cluster
    if current and view.placed.get(current):
        return current
    if not view.placed:
        return ""
    return min(view.placed, key=lambda c: (-view.placed[c], c))
