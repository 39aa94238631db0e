"""Pure parts of a service spanning linked clusters: which clusters get a copy (links count in
either direction, not transitively), which replicas each copy fronts, the copy's spec and its
selector-less Kubernetes Service and slices, the per-cluster status, and how skyctl shows it."""

from __future__ import annotations

from typing import Any

from skyshift.activities.service_store import apply_service_patch
from skyshift.cli.describe import reachable_table
from skyshift.cli.tables import service_rows
from skyshift.compat.kubernetes.services import LINKED, service_manifest
from skyshift.compat.kubernetes.slices import desired_slices
from skyshift.compat.types import ServicePort
from skyshift.contract.services import Reach, ServiceStatusPatch
from skyshift.lifecycle.service_convert import (
    linked_clusters,
    linked_spec,
    merge_addresses,
    reached,
    service_input,
    view_of,
)
from skyshift.models.service import Service

Obj = dict[str, Any]


def link(source: str, target: str, phase: str = "Ready", gateway: bool = False) -> Obj:
    spec: Obj = {"source_cluster": source, "target_cluster": target}
    if gateway:
        spec["gateway"] = {"address": "gw", "port": 443}
    return {"spec": spec, "status": {"phase": phase}}


def clusters(*names: str) -> list[Obj]:
    return [{"metadata": {"name": n}, "status": {"phase": "Ready"}} for n in names]


def svc_obj() -> Obj:
    return {"kind": "Service",
            "metadata": {"name": "web", "namespace": "ml", "uid": "u1", "generation": 2},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "clusterIP": "10.96.0.9",
                     "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}]}}


def test_links_count_both_ways_but_not_transitively() -> None:
    links = [link("p", "a"), link("b", "p"), link("a", "c"), link("p", "d", phase="Error"),
             link("p", "e", gateway=True), link("p", "gone"), link("a", "p")]
    view = view_of([], clusters("p", "a", "b", "c", "d", "e"), {"app": "web"}, links)
    assert view.peers["p"] == ["a", "b", "gone"]  # deduplicated, sorted
    # a cluster that does not exist gets no copy; c is linked to a, not to p
    assert linked_clusters(view, "p") == ["a", "b"]
    span = ["p", "a", "b"]
    assert reached(view, "p", span) == ["p", "a", "b"]
    assert reached(view, "a", span) == ["p", "a"]  # a and b share no Link
    assert reached(view, "b", span) == ["p", "b"]
    assert linked_clusters(view, "c") == ["a"]


def test_addresses_merged_per_target_port() -> None:
    found = {"p": {"8080": ["10.0.0.1:8080"]},
             "a": {"8080": ["10.1.0.1:8080", "10.0.0.1:8080"], "9090": ["10.1.0.1:9090"]},
             "b": {"8080": ["127.0.0.1:41000"]}}
    assert merge_addresses(found, ["p", "a"]) == {
        "8080": ["10.0.0.1:8080", "10.1.0.1:8080"], "9090": ["10.1.0.1:9090"]}
    assert merge_addresses(found, ["x"]) == {}


def test_linked_copy_is_a_selectorless_cluster_ip_service() -> None:
    inp = service_input(svc_obj())
    assert inp.template is not None
    spec = linked_spec(inp, inp.template, {"8080": ["10.244.0.5:8080", "10.244.0.6:8080"]})
    assert spec.linked and spec.type == "ClusterIP" and spec.cluster_ip == ""
    assert spec.ports == [ServicePort(80, 8080, 0, "TCP")]  # no node port on the copy
    m = service_manifest(spec)
    assert "selector" not in m["spec"] and m["metadata"]["labels"][LINKED] == "true"
    assert m["spec"]["type"] == "ClusterIP" and m["spec"]["ports"][0]["targetPort"] == 8080
    # a primary's Service that becomes a copy loses its selector and keeps its address
    current = {"metadata": {"resourceVersion": "3"},
               "spec": {"clusterIP": "10.96.7.7", "selector": {"app": "web"}}}
    replaced = service_manifest(spec, current)
    assert "selector" not in replaced["spec"] and replaced["spec"]["clusterIP"] == "10.96.7.7"
    # its slices list what it fronts (backends), not remote_backends
    slices, skipped = desired_slices(spec, spec.backends)
    assert skipped == 0
    [only] = slices.values()
    assert [e["addresses"] for e in only["endpoints"]] == [["10.244.0.5"], ["10.244.0.6"]]
    assert desired_slices(spec) == ({}, 0)  # remote_backends: none on a copy


def test_reachable_status_and_how_skyctl_shows_it() -> None:
    obj = Service.model_validate(svc_obj()).to_dict()
    patch = ServiceStatusPatch("ml", "web", "u1", phase="Ready", cluster="p",
                               reachable=[Reach("p", "10.96.0.9", "lb.example.com"),
                                          Reach("a", "10.97.0.4", role="linked")])
    out = apply_service_patch(obj, patch)
    assert out is not None
    assert out["status"]["reachable"] == [
        {"cluster": "p", "clusterIP": "10.96.0.9", "externalIP": "lb.example.com",
         "role": "primary"},
        {"cluster": "a", "clusterIP": "10.97.0.4", "externalIP": "", "role": "linked"}]
    valid = Service.model_validate(out)
    assert [r.role for r in valid.status.reachable] == ["primary", "linked"]
    [row] = service_rows(out, wide=True, now=None)
    assert row[-1] == "a=10.97.0.4"  # LINKED column of -o wide
    table = reachable_table(out["status"]["reachable"])
    assert table.splitlines()[0].split() == ["CLUSTER", "ROLE", "CLUSTER-IP", "EXTERNAL-IP"]
    assert table.splitlines()[2].split() == ["a", "linked", "10.97.0.4", "<none>"]
    assert apply_service_patch(out, patch) is None  # same again: no write
