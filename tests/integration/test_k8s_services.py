"""The ``k8`` adapter's services against a real kube-apiserver (``skyshift sim k8s``): a v1
Service is created with the SkyShift selector, a clusterIP from the apiserver's range is
reported, an update keeps that address, types and ports change in place, delete removes it, and
a name owned by another SkyShift namespace is refused; a primary's Service turns into a linked
cluster's selector-less copy and back."""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.kubernetes.adapter import KubernetesManager
from skyshift.compat.kubernetes.objects import MANAGED_BY, NAMESPACE
from skyshift.compat.services import ServiceManager
from skyshift.compat.types import ServicePort, ServiceSpec
from skyshift.devstack.sim.k8s import SimK8sCluster

pytest_plugins = ["tests.fixtures.k8s"]
pytestmark = pytest.mark.integration


@pytest.fixture
async def manager(k8s_clusters: list[SimK8sCluster], k8s_config: Any
                  ) -> AsyncIterator[KubernetesManager]:
    cluster = k8s_clusters[0]
    m = KubernetesManager(cluster.name, k8s_config(cluster, watch=False))
    yield m
    await m.close()


async def get_service(m: KubernetesManager, name: str) -> dict[str, Any] | None:
    return await asyncio.to_thread(m._get_service, name)


def spec(name: str, **kw: Any) -> ServiceSpec:
    kw.setdefault("selector", {"app": "web"})
    kw.setdefault("ports", [ServicePort(80, 8080)])
    return ServiceSpec(name=name, namespace="default", uid=str(uuid.uuid4()), **kw)


async def test_apply_update_delete_a_real_service(manager: KubernetesManager) -> None:
    assert isinstance(manager, ServiceManager)
    name = f"web-{uuid.uuid4().hex[:6]}"
    status = await manager.apply_service(spec(name))
    assert ipaddress.ip_address(status.cluster_ip) in ipaddress.ip_network("10.96.0.0/16")
    assert status.external_ip == "" and status.name == name and status.namespace == "default"
    obj = await get_service(manager, name)
    assert obj is not None
    assert obj["spec"]["selector"] == {"app": "web", MANAGED_BY: "skyshift", NAMESPACE: "default"}
    assert [(p["port"], p["targetPort"], p["protocol"]) for p in obj["spec"]["ports"]] == [
        (80, 8080, "TCP")]

    # applying the same spec again is a no-op that reports the same address
    again = await manager.apply_service(spec(name))
    assert again.cluster_ip == status.cluster_ip

    # an update: another port, NodePort type; the clusterIP stays, node ports are allocated
    updated = await manager.apply_service(spec(
        name, type="NodePort", selector={"app": "web", "tier": "front"},
        ports=[ServicePort(80, 8080), ServicePort(443, 8443)]))
    assert updated.cluster_ip == status.cluster_ip
    assert [p.port for p in updated.ports] == [80, 443]
    assert all(30000 <= p.node_port <= 32767 for p in updated.ports)
    obj = await get_service(manager, name)
    assert obj is not None and obj["spec"]["type"] == "NodePort"
    assert obj["spec"]["selector"]["tier"] == "front"
    # node ports survive a later apply of the same ports
    kept = await manager.apply_service(spec(
        name, type="NodePort", selector={"app": "web", "tier": "front"},
        ports=[ServicePort(80, 8080), ServicePort(443, 8443)]))
    assert [p.node_port for p in kept.ports] == [p.node_port for p in updated.ports]

    # LoadBalancer without a controller to give it an address: pending, said so
    lb = await manager.apply_service(spec(name, type="LoadBalancer"))
    assert lb.external_ip == "" and "load balancer" in lb.message

    await manager.delete_service("default", name)
    assert await get_service(manager, name) is None
    await manager.delete_service("default", name)  # already gone: fine


async def test_name_of_another_namespace_is_refused_and_left_alone(
    manager: KubernetesManager,
) -> None:
    name = f"shared-{uuid.uuid4().hex[:6]}"
    await manager.apply_service(spec(name))
    other = ServiceSpec(name=name, namespace="team-b", ports=[ServicePort(80)],
                        selector={"app": "x"})
    with pytest.raises(Permanent, match="taken by SkyShift namespace default"):
        await manager.apply_service(other)
    await manager.delete_service("team-b", name)  # not its own: nothing happens
    assert await get_service(manager, name) is not None
    await manager.delete_service("default", name)
    assert await get_service(manager, name) is None


async def test_invalid_specs_are_permanent(manager: KubernetesManager) -> None:
    with pytest.raises(Permanent, match="at least one port"):
        await manager.apply_service(spec("noports", ports=[]))
    with pytest.raises(Permanent, match="not one of"):
        await manager.apply_service(spec("badtype", type="ExternalName"))


async def slices_of(m: KubernetesManager, name: str, manager_label: str) -> list[dict[str, Any]]:
    path = f"/apis/discovery.k8s.io/v1/namespaces/{m.settings.namespace}/endpointslices"
    selector = (f"kubernetes.io/service-name={name},"
                f"endpointslice.kubernetes.io/managed-by={manager_label}")
    got = await asyncio.to_thread(m.api.request, "GET", path, {"labelSelector": selector})
    items: list[dict[str, Any]] = got.get("items") or []
    return items


async def test_a_primary_service_becomes_a_selectorless_linked_copy(
    manager: KubernetesManager,
) -> None:
    """The service's primary moved away and this cluster is linked with the new one: the same
    Service (same address) loses its selector, the endpointslice controller's slice of it is
    removed (nothing would update it any more), and SkyShift's slices list every address the
    copy fronts; back as the primary, the selector returns and only the remote addresses
    stay in SkyShift's slices."""
    name = f"copy-{uuid.uuid4().hex[:6]}"
    first = await manager.apply_service(spec(name, remote_backends={"8080": ["10.9.0.7:8080"]}))

    async def controller_slices() -> list[dict[str, Any]]:
        return await slices_of(manager, name, "endpointslice-controller.k8s.io")

    for _ in range(100):  # the controller makes a (here empty) slice for a Service it selects
        if await controller_slices():
            break
        await asyncio.sleep(0.1)
    assert await controller_slices()
    copy = await manager.apply_service(spec(
        name, linked=True, backends={"8080": ["10.9.0.7:8080", "10.8.0.3:8080"]}))
    assert copy.cluster_ip == first.cluster_ip and copy.needs_backends
    obj = await get_service(manager, name)
    assert obj is not None and "selector" not in obj["spec"]
    assert obj["metadata"]["labels"]["skyshift.io/linked"] == "true"
    assert await controller_slices() == []
    ours = await slices_of(manager, name, "skyshift.io")
    assert sorted(a for s in ours for e in s["endpoints"] for a in e["addresses"]) == [
        "10.8.0.3", "10.9.0.7"]
    back = await manager.apply_service(spec(name, remote_backends={"8080": ["10.9.0.7:8080"]}))
    assert back.cluster_ip == first.cluster_ip and back.needs_remote
    obj = await get_service(manager, name)
    assert obj is not None and obj["spec"]["selector"]["app"] == "web"
    ours = await slices_of(manager, name, "skyshift.io")
    assert [a for s in ours for e in s["endpoints"] for a in e["addresses"]] == ["10.9.0.7"]
    await manager.delete_service("default", name)
    assert await slices_of(manager, name, "skyshift.io") == []
