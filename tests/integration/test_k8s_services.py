"""The ``k8`` adapter's services against a real kube-apiserver (``skyshift sim k8s``): a v1
Service is created with the SkyShift selector, a clusterIP from the apiserver's range is
reported, an update keeps that address, types and ports change in place, delete removes it, and
a name owned by another SkyShift namespace is refused."""

from __future__ import annotations

import asyncio
import ipaddress
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from skyshift.compat.errors import Permanent
from skyshift.compat.kubernetes import KubernetesManager
from skyshift.compat.kubernetes_objects import MANAGED_BY, NAMESPACE
from skyshift.compat.services import ServiceManager
from skyshift.compat.types import ServicePort, ServiceSpec
from skyshift.devstack.sim_k8s import SimK8sCluster

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
