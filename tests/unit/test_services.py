"""Pure parts of services: manifests -> payloads, selector matching, the primary-cluster rule,
the Kubernetes Service mapping, status and Endpoints writes, and Unsupported for managers
without services."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.activities.service_store import (
    OWNER,
    apply_service_patch,
    endpoints_object,
)
from skyshift.compat import services
from skyshift.compat.errors import Unsupported
from skyshift.compat.kubernetes.services import service_manifest, service_status
from skyshift.compat.types import ServicePort, ServiceSpec
from skyshift.contract.services import (
    EndpointsWrite,
    ServiceStatusPatch,
    ServiceTemplate,
    ServiceView,
)
from skyshift.lifecycle.service_convert import (
    choose_primary,
    parse_service,
    selects,
    service_input,
    view_of,
)
from skyshift.models.endpoints import Endpoints
from skyshift.models.service import Service


def svc(**spec: Any) -> dict[str, Any]:
    return {"kind": "Service",
            "metadata": {"name": "web", "namespace": "ml", "uid": "u1", "generation": 3},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}],
                     **spec}}


def job(labels: dict[str, str], placement: dict[str, int], running: dict[str, int],
        phase: str = "Running", deleting: bool = False, uid: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "labels": labels, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {
        "phase": phase, "placement": placement,
        "replicaStatus": {c: {"Running": n, "Pending": 1} for c, n in running.items()}}}


def test_service_input_and_invalid_spec() -> None:
    inp = service_input(svc(type="NodePort", primaryCluster="k1"))
    assert (inp.namespace, inp.name, inp.uid, inp.generation) == ("ml", "web", "u1", 3)
    assert inp.template == ServiceTemplate("NodePort", {"app": "web"}, [ServicePort(80, 8080)],
                                           "", "k1")
    template, why = parse_service(svc(type="Headless"))
    assert template is None and "invalid service spec" in why and "type" in why


def test_selector_matching_and_view() -> None:
    assert selects({"app": "web"}, {"app": "web", "x": "y"})
    assert not selects({"app": "web"}, {"app": "db"})
    assert not selects({}, {"app": "web"})  # empty selector selects nothing
    jobs = [
        job({"app": "web"}, {"a": 2, "b": 1}, {"a": 2}, uid="u-1"),
        job({"app": "web"}, {"b": 3}, {"b": 1}, uid="u-2"),
        job({"app": "web"}, {"c": 5}, {"c": 5}, phase="Succeeded"),  # finished: not counted
        job({"app": "web"}, {"c": 5}, {"c": 5}, deleting=True),
        job({"app": "db"}, {"c": 9}, {"c": 9}),
    ]
    clusters = [{"metadata": {"name": "a"}, "status": {"phase": "Ready"}},
                {"metadata": {"name": "b"}}]
    links = [
        {"spec": {"source_cluster": "a", "target_cluster": "b"}, "status": {"phase": "Ready"}},
        {"spec": {"source_cluster": "a", "target_cluster": "c"}, "status": {"phase": "Error"}},
        {"spec": {"source_cluster": "b", "target_cluster": "a",
                  "gateway": {"address": "gw", "port": 1}}, "status": {"phase": "Ready"}},
    ]
    view = view_of(jobs, clusters, {"app": "web"}, links)
    assert view == ServiceView(placed={"a": 2, "b": 4}, running={"a": 2, "b": 1},
                               clusters={"a": "Ready", "b": "Init"}, jobs=2,
                               job_uids={"a": ["u-1"], "b": ["u-2"]},
                               links={"a": ["b"]},  # Ready and direct links only
                               peers={"a": ["b"], "b": ["a"]})  # either direction


def test_primary_cluster_rule() -> None:
    view = ServiceView(placed={"a": 2, "b": 4, "c": 4})
    assert choose_primary(ServiceTemplate(primary_cluster="x"), view, "a") == "x"
    assert choose_primary(ServiceTemplate(), view, "") == "b"  # most; ties by name
    assert choose_primary(ServiceTemplate(), view, "a") == "a"  # sticky while placed there
    assert choose_primary(ServiceTemplate(), view, "gone") == "b"
    assert choose_primary(ServiceTemplate(), ServiceView(), "") == ""


def test_kubernetes_manifest_and_status() -> None:
    spec = ServiceSpec("web", "ml", uid="u1", type="NodePort", selector={"app": "web"},
                       ports=[ServicePort(80, 8080), ServicePort(53, 0, 30053, "UDP")])
    m = service_manifest(spec)
    assert m["spec"]["selector"] == {"app": "web", "skyshift.io/managed-by": "skyshift",
                                     "skyshift.io/namespace": "ml"}
    assert m["spec"]["ports"] == [
        {"name": "tcp-80", "port": 80, "targetPort": 8080, "protocol": "TCP"},
        {"name": "udp-53", "port": 53, "targetPort": 53, "protocol": "UDP", "nodePort": 30053},
    ]
    assert "clusterIP" not in m["spec"] and "resourceVersion" not in m["metadata"]
    current = {"metadata": {"resourceVersion": "7"}, "spec": {
        "clusterIP": "10.96.0.9", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31000}]}}
    replaced = service_manifest(spec, current)
    assert replaced["metadata"]["resourceVersion"] == "7"
    assert replaced["spec"]["clusterIP"] == "10.96.0.9"
    assert replaced["spec"]["ports"][0]["nodePort"] == 31000  # kept
    lb = {"metadata": {"name": "web", "labels": {"skyshift.io/namespace": "ml"}},
          "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9",
                   "ports": [{"port": 80, "targetPort": 8080, "nodePort": 31000}]},
          "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}}
    st = service_status(lb)
    assert (st.name, st.namespace, st.cluster_ip, st.external_ip, st.message) == (
        "web", "ml", "10.96.0.9", "lb.example.com", "")
    assert st.ports == [ServicePort(80, 8080, 31000, "TCP")]
    lb["status"] = {}
    assert "load balancer" in service_status(lb).message


def test_status_patch_and_endpoints_object() -> None:
    obj = Service.model_validate(svc()).to_dict()
    obj["metadata"]["uid"] = "u1"
    patch = ServiceStatusPatch("ml", "web", "u1", phase="Ready", cluster="k1",
                               cluster_ip="10.96.0.9", observed_generation=3,
                               workflow_id="service/ml/web")
    out = apply_service_patch(obj, patch)
    assert out is not None and out["status"]["phase"] == "Ready"
    assert out["status"]["clusterIP"] == "10.96.0.9" and out["status"]["cluster"] == "k1"
    Service.model_validate(out)  # still a valid Service
    assert apply_service_patch(out, patch) is None  # no change: no write
    assert apply_service_patch(out, ServiceStatusPatch("ml", "web", "other", phase="x")) is None
    out["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    out["status"]["phase"] = "Deleting"
    assert apply_service_patch(out, ServiceStatusPatch("ml", "web", "u1", phase="Ready",
                                                       message="late")) is not None
    assert out["status"]["phase"] == "Deleting"  # a late write never undoes Deleting
    ep = endpoints_object(EndpointsWrite("ml", "web", "u1", {"app": "web"}, "k1",
                                         {"k1": 2, "k2": 0}))
    assert ep["metadata"]["annotations"] == {OWNER: "u1"}
    valid = Endpoints.model_validate(ep)
    assert valid.spec.endpoints["k1"].num_endpoints == 2
    assert valid.spec.endpoints["k1"].exposed_to_cluster
    assert not valid.spec.endpoints["k2"].exposed_to_cluster


class NoServices:
    manager = "local"


async def test_managers_without_services_are_unsupported() -> None:
    spec = ServiceSpec("web", "ml", ports=[ServicePort(80)])
    with pytest.raises(Unsupported, match=r"local cluster has no services.*Kubernetes"):
        await services.apply_service(NoServices(), spec)
    with pytest.raises(Unsupported, match="local cluster has no services"):
        await services.delete_service(NoServices(), "ml", "web")
    from skyshift.compat.slurm.adapter import SlurmManager

    slurm = SlurmManager("s", {})
    with pytest.raises(Unsupported, match=r"^Slurm clusters have no services; put the service"):
        await services.apply_service(slurm, spec)
