"""Services end to end on Kubernetes: a Job with labels, a Service selecting them (``skyctl
create service``), through the whole stack onto the simulated clusters' kube-apiservers.

Uses the stack and the three attached clusters of ``test_k8s_e2e`` (its module fixtures,
imported, so this module gets a stack of its own). The service must become Ready on the cluster
that holds the job's replicas, with the clusterIP the apiserver allocated; the Endpoints object
counts the running replicas there; ``skyctl get services`` / ``describe`` show it; a spec change
reaches the cluster's Service (same clusterIP); deleting the service removes it from the cluster
and the Endpoints with it. With a Link, the linked cluster gets a selector-less copy whose
EndpointSlices (read from its kube-apiserver) list the pods of both clusters, follow them, and go
with the Link and with the service. Every wait is a poll with a deadline.
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


def sliced_ips(slices: list[Obj]) -> set[str]:
    return {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}


async def mesh_job(env: K8sE2E, cluster: str, app: str, base_name: str, replicas: int) -> Obj:
    job_name = env.job_name(base_name)
    await env.api.create({
        "kind": "Job",
        "metadata": {"name": job_name, "labels": {"e2e-run": env.run_id, "app": app}},
        "spec": {"run": "sleep 3600", "replicas": replicas, "restartPolicy": "Never",
                 "resources": {"cpus": 0.5, "memory": 100}, "ports": [8080],
                 "placement": {"filters": [{"matchLabels": {
                     "e2e-k8s": env.run_id, "zone": base.ZONES[cluster][0]}}]}},
    })
    env.jobs.append(job_name)
    return await env.phase("jobs", job_name, "Running", timeout=120)


async def make_link(env: K8sE2E, name: str, source: str, target: str) -> None:
    made = await env.skyctl("create", "link", name, "--source", source, "--target", target)
    assert made.returncode == 0, made.stderr
    await env.phase("links", name, "Ready", timeout=90)


async def test_linked_clusters_replicas_become_endpointslices(k8: K8sE2E) -> None:
    """A service on one cluster, replicas of its selector on two, a Link between them: the
    service's cluster gets the other's pod IPs as EndpointSlices of its Service, and the linked
    cluster gets a selector-less Service of its own whose EndpointSlices list the pods of both
    (all checked through the kube API); they follow the replicas, the copy goes with the Link
    and, with a Link again, with the service."""
    env = k8
    home, away = sorted(env.sims)[:2]
    app = f"mesh-{env.run_id}"
    name = env.job_name("meshsvc")
    jobs = {c: await mesh_job(env, c, app, f"mesh-{c[-1]}", 2) for c in (home, away)}
    link = f"l-{env.run_id}"
    await make_link(env, link, home, away)
    made = await env.skyctl("create", "service", name, "-s", "app", app, "-p", "80", "8080",
                            "-c", home)
    assert made.returncode == 0, made.stderr
    await env.phase("services", name, "Ready", timeout=120)
    ips = {c: await pod_ips(env, c, jobs[c]) for c in (home, away)}
    assert len(ips[home]) == len(ips[away]) == 2

    async def sliced(cluster: str, want: set[str]) -> list[Obj] | None:
        slices = await k8s_slices(env, cluster, name)
        return slices if sliced_ips(slices) == want else None

    slices = await env.wait("the other cluster's pods in an EndpointSlice",
                            lambda: sliced(home, ips[away]), timeout=90)
    assert all(s["ports"][0]["port"] == 8080 and s["addressType"] == "IPv4" for s in slices)
    assert all(s["ports"][0]["name"] == "tcp-80" for s in slices)  # the Service port's name

    # the linked cluster: a selector-less Service, slices with the pods of both clusters
    copy_slices = await env.wait("the copy's EndpointSlices on the linked cluster",
                                 lambda: sliced(away, ips[home] | ips[away]), timeout=90)
    assert all(s["ports"][0]["name"] == "tcp-80" for s in copy_slices)
    copy = await k8s_service(env, away, name)
    assert copy is not None and "selector" not in copy["spec"]
    assert copy["spec"]["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in copy["spec"]["ports"]] == [(80, 8080)]
    primary = await k8s_service(env, home, name)
    assert primary is not None and primary["spec"]["selector"]["app"] == app

    async def reachable(clusters: list[str]) -> Obj | None:
        svc = await env.get("services", name)
        got = ((svc or {}).get("status") or {}).get("reachable") or []
        return svc if [r["cluster"] for r in got] == clusters else None

    svc = await env.wait("status: reachable on both", lambda: reachable([home, away]), 60)
    roles = {r["cluster"]: r for r in svc["status"]["reachable"]}
    assert roles[away]["role"] == "linked" and roles[home]["role"] == "primary"
    assert roles[away]["clusterIP"] == copy["spec"]["clusterIP"]
    assert roles[home]["clusterIP"] == primary["spec"]["clusterIP"]
    wide = await env.skyctl("get", "services", "-o", "wide")
    assert wide.returncode == 0 and f"{away}={copy['spec']['clusterIP']}" in wide.stdout
    # Endpoints: the primary's own pods are listed by address too, like the linked cluster's
    ep = await env.get("endpoints", name)
    assert ep is not None
    listed = ep["spec"]["endpoints"]
    for cluster in (home, away):
        assert sorted(listed[cluster]["addresses"]) == sorted(f"{ip}:8080" for ip in ips[cluster])
        assert listed[cluster]["exposed_to_cluster"]

    # one more replica on the primary: its pod appears on the linked cluster, and goes
    more = await mesh_job(env, home, app, "mesh-more", 1)
    extra = await pod_ips(env, home, more)
    assert len(extra) == 1
    await env.wait("the new pod in the copy's slices",
                   lambda: sliced(away, ips[home] | ips[away] | extra), timeout=90)
    await env.delete("jobs", more["metadata"]["name"])
    await env.gone("jobs", more["metadata"]["name"], timeout=90)
    await env.wait("the deleted pod out of the copy's slices",
                   lambda: sliced(away, ips[home] | ips[away]), timeout=90)

    # the Link goes: the copy and its slices go, the service stays on its cluster alone
    await env.delete("links", link)
    await env.gone("links", link, timeout=60)

    async def copy_gone() -> bool:
        return await k8s_service(env, away, name) is None and \
            await k8s_slices(env, away, name) == []

    await env.wait("the copy removed with the Link", copy_gone, timeout=90)
    await env.wait("status: reachable on its cluster only", lambda: reachable([home]), 60)
    async def no_slices() -> bool:
        return await k8s_slices(env, home, name) == []

    await env.wait("no linked pods on the primary", no_slices, timeout=90)
    assert await k8s_service(env, home, name) is not None

    # a Link again (the other direction counts too): the copy is back; deleting the service
    # removes it from both clusters
    await make_link(env, link, away, home)
    await env.wait("the copy back", lambda: sliced(away, ips[home] | ips[away]), timeout=90)
    await env.delete("services", name)
    await env.gone("services", name, timeout=60)
    for cluster in (home, away):
        assert await k8s_slices(env, cluster, name) == []
        assert await k8s_service(env, cluster, name) is None
    await env.delete("links", link)
