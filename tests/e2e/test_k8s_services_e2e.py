"""Services end to end on Kubernetes: a Job with labels, a Service selecting them (``skyctl
create service``), through the whole stack onto the simulated clusters' kube-apiservers.

Uses the stack and the three attached clusters of ``test_k8s_e2e`` (its module fixtures,
imported, so this module gets a stack of its own). The service must become Ready on the cluster
that holds the job's replicas, with the clusterIP the apiserver allocated; the Endpoints object
counts the running replicas there; ``skyctl get services`` / ``describe`` show it; a spec change
reaches the cluster's Service (same clusterIP); deleting the service removes it from the cluster
and the Endpoints with it. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import ipaddress
import ssl
from typing import Any

import httpx
import pytest

from tests.e2e import test_k8s_e2e as base
from tests.e2e.k8s_helpers import K8S_NAMESPACE, K8sE2E, Obj, placement

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# the Kubernetes e2e module's fixtures (module-scoped: this module gets its own stack)
k8s_stack, e2e, k8 = base.k8s_stack, base.e2e, base.k8


async def k8s_service(env: K8sE2E, cluster: str, name: str) -> Obj | None:
    """The v1 Service ``name`` as the cluster's kube-apiserver has it (None: absent)."""
    sim = env.sims[cluster]
    tls = ssl.create_default_context(cafile=str(sim.ca_file))
    async with httpx.AsyncClient(base_url=sim.server, verify=tls, timeout=10.0,
                                 headers={"Authorization": f"Bearer {sim.token}"}) as http:
        resp = await http.get(f"/api/v1/namespaces/{K8S_NAMESPACE}/services/{name}")
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        obj: Obj = resp.json()
        return obj


async def test_service_ready_with_cluster_ip_endpoints_update_and_delete(k8: K8sE2E) -> None:
    env = k8
    app = f"web-{env.run_id}"
    name = env.job_name("websvc")
    job_name = env.job_name("webjob")
    await env.api.create({
        "kind": "Job",
        "metadata": {"name": job_name, "labels": {"e2e-run": env.run_id, "app": app}},
        "spec": {"run": "sleep 3600", "replicas": 2, "restartPolicy": "Never",
                 "resources": {"cpus": 3, "memory": 1000}, "ports": [8080],
                 "placement": {"filters": [{"matchLabels": {"e2e-k8s": env.run_id}}]}},
    })
    env.jobs.append(job_name)
    job = await env.phase("jobs", job_name, "Running", timeout=120)
    placed = placement(job)
    primary = min(placed, key=lambda c: (-placed[c], c))

    made = await env.skyctl("create", "service", name, "-s", "app", app, "-p", "80", "8080")
    assert made.returncode == 0, made.stderr
    svc = await env.phase("services", name, "Ready", timeout=120)
    status = svc["status"]
    assert status["cluster"] == primary
    assert ipaddress.ip_address(status["clusterIP"]) in ipaddress.ip_network("10.96.0.0/16")
    assert status["workflowId"] == f"service/default/{name}"
    real = await k8s_service(env, primary, name)
    assert real is not None and real["spec"]["clusterIP"] == status["clusterIP"]
    assert real["spec"]["selector"]["app"] == app
    assert [(p["port"], p["targetPort"]) for p in real["spec"]["ports"]] == [(80, 8080)]
    for other in set(env.sims) - {primary}:
        assert await k8s_service(env, other, name) is None

    async def counted() -> Obj | None:
        ep = await env.get("endpoints", name)
        got: dict[str, Any] = ((ep or {}).get("spec") or {}).get("endpoints") or {}
        running = sum(int(e.get("num_endpoints") or 0) for e in got.values())
        return ep if running == 2 else None

    ep = await env.wait("Endpoints count both running replicas", counted, timeout=60)
    assert ep["spec"]["primary_cluster"] == primary
    assert ep["spec"]["endpoints"][primary]["exposed_to_cluster"]
    assert {c: e["num_endpoints"] for c, e in ep["spec"]["endpoints"].items() if
            e["num_endpoints"]} == {c: n for c, n in placed.items() if n}

    table = await env.skyctl("get", "services")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORTS", "CLUSTER",
                              "STATUS", "NAMESPACE", "AGE"]
    row = next(r.split() for r in rows if r.split()[0] == name)
    assert row[1:8] == ["ClusterIP", status["clusterIP"], "<none>", "80:8080/TCP", primary,
                        status["phase"], "default"]
    described = await env.skyctl("describe", "service", name)
    assert described.returncode == 0 and f"service/default/{name}" in described.stdout

    # a spec change reaches the cluster's Service and keeps its address
    await env.api.patch("services", name, None, {"spec": {"ports": [
        {"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}})

    async def updated() -> Obj | None:
        real = await k8s_service(env, primary, name)
        ports = [p["port"] for p in ((real or {}).get("spec") or {}).get("ports") or []]
        return real if ports == [80, 443] else None

    real = await env.wait("the update on the cluster", updated, timeout=60)
    assert real["spec"]["clusterIP"] == status["clusterIP"]
    svc = await env.phase("services", name, "Ready")
    assert svc["status"]["observedGeneration"] == svc["metadata"]["generation"] >= 2

    await env.delete("services", name)
    await env.gone("services", name, timeout=60)
    assert await env.get("endpoints", name) is None
    assert await k8s_service(env, primary, name) is None


async def k8s_slices(env: K8sE2E, cluster: str, service: str) -> list[Obj]:
    """The EndpointSlices SkyShift wrote for ``service`` on ``cluster``, from its apiserver."""
    sim = env.sims[cluster]
    tls = ssl.create_default_context(cafile=str(sim.ca_file))
    selector = (f"kubernetes.io/service-name={service},"
                "endpointslice.kubernetes.io/managed-by=skyshift.io")
    async with httpx.AsyncClient(base_url=sim.server, verify=tls, timeout=10.0,
                                 headers={"Authorization": f"Bearer {sim.token}"}) as http:
        resp = await http.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{K8S_NAMESPACE}/endpointslices",
            params={"labelSelector": selector})
        resp.raise_for_status()
        items: list[Obj] = resp.json()["items"]
        return items


async def pod_ips(env: K8sE2E, cluster: str, job: Obj) -> set[str]:
    pods = await env.k8s(cluster, "pods", job["metadata"]["uid"])
    return {str(p["status"]["podIP"]) for p in pods if (p.get("status") or {}).get("podIP")}


async def test_linked_clusters_replicas_become_endpointslices(k8: K8sE2E) -> None:
    """A service on one cluster, replicas of its selector on two: with a Link from the service's
    cluster to the other, the other cluster's pod IPs appear in an EndpointSlice of the Service
    (checked through the kube API), follow the replicas, and go with the service."""
    env = k8
    home, away = sorted(env.sims)[:2]
    app = f"mesh-{env.run_id}"
    name = env.job_name("meshsvc")
    jobs = {}
    for cluster in (home, away):
        job_name = env.job_name(f"mesh-{cluster[-1]}")
        await env.api.create({
            "kind": "Job",
            "metadata": {"name": job_name, "labels": {"e2e-run": env.run_id, "app": app}},
            "spec": {"run": "sleep 3600", "replicas": 2, "restartPolicy": "Never",
                     "resources": {"cpus": 0.5, "memory": 100}, "ports": [8080],
                     "placement": {"filters": [{"matchLabels": {
                         "e2e-k8s": env.run_id, "zone": base.ZONES[cluster][0]}}]}},
        })
        env.jobs.append(job_name)
        jobs[cluster] = await env.phase("jobs", job_name, "Running", timeout=120)
    link = f"l-{env.run_id}"
    made = await env.skyctl("create", "link", link, "--source", home, "--target", away)
    assert made.returncode == 0, made.stderr
    await env.phase("links", link, "Ready", timeout=90)
    made = await env.skyctl("create", "service", name, "-s", "app", app, "-p", "80", "8080",
                            "-c", home)
    assert made.returncode == 0, made.stderr
    await env.phase("services", name, "Ready", timeout=120)
    want = await pod_ips(env, away, jobs[away])
    assert len(want) == 2

    async def sliced() -> list[Obj] | None:
        slices = await k8s_slices(env, home, name)
        got = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
        return slices if got == want else None

    slices = await env.wait("the other cluster's pods in an EndpointSlice", sliced, timeout=90)
    assert all(s["ports"][0]["port"] == 8080 and s["addressType"] == "IPv4" for s in slices)
    assert all(s["ports"][0]["name"] == "tcp-80" for s in slices)  # the Service port's name
    assert await k8s_slices(env, away, name) == []  # the service lives on its cluster only
    ep = await env.get("endpoints", name)
    assert ep is not None and sorted(ep["spec"]["endpoints"][away]["addresses"]) == sorted(
        f"{ip}:8080" for ip in want)

    await env.delete("services", name)
    await env.gone("services", name, timeout=60)
    assert await k8s_slices(env, home, name) == []
    await env.delete("links", link)
