"""Service lifecycles on the real stack (etcd, Temporal dev server, control worker and skylet
manager in process): on a Slurm cluster (real slurmctld/slurmd), which has no services, the
service ends Failed with the adapter's Unsupported message, is not retried, keeps its Endpoints;
on a local cluster it is Ready behind HAProxy (traffic: tests/integration/test_mesh_local.py).
Deletion removes both objects."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from skyshift.contract.names import service_workflow_id
from skyshift.devstack.sim.slurm import SimSlurmCluster
from skyshift.lifecycle.converter import DATA_CONVERTER
from skyshift.models.meta import now_iso
from skyshift.workers.control import WORKFLOWS
from tests.fixtures.require import require_binary
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def add_service(s: LifecycleStack, name: str, **spec: Any) -> dict[str, Any]:
    from skyshift.lifecycle import starter

    obj = {
        "apiVersion": "skyshift.io/v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4()),
                     "generation": 1, "creationTimestamp": now_iso()},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}], **spec},
        "status": {"phase": "Pending"},
    }
    created: dict[str, Any] = await s.store.create("services", obj)
    await starter.ensure_lifecycle(s.client, created)
    return created


async def service_phase(s: LifecycleStack, name: str, phase: str,
                        timeout: float = 60.0) -> dict[str, Any]:
    """The service once its workflow wrote ``phase`` (with a message) to its status."""
    async def check() -> dict[str, Any] | None:
        obj = await s.get("services", name, "default")
        status = (obj or {}).get("status") or {}
        return obj if status.get("phase") == phase and status.get("message") else None

    try:
        found: dict[str, Any] = await s.wait(f"service {name} {phase}", check, timeout)
        return found
    except AssertionError:
        obj = await s.get("services", name, "default")
        raise AssertionError(f"service {name} not {phase}: {obj}") from None


async def apply_attempts(client: Client, wf_id: str) -> int:
    history = await client.get_workflow_handle(wf_id).fetch_history()
    return sum(
        1 for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == "apply_service"
    )


async def delete_and_wait_gone(s: LifecycleStack, name: str) -> None:
    await s.delete("services", name, "default")

    async def gone() -> bool:
        return (await s.get("services", name, "default") is None
                and await s.get("endpoints", name, "default") is None)

    await s.wait(f"service {name} and its endpoints removed", gone, timeout=30)


async def test_service_on_slurm_fails_with_unsupported(
    lifecycle_stack: LifecycleStack, slurm_clusters: list[SimSlurmCluster],
) -> None:
    from skyshift.lifecycle import starter

    s = lifecycle_stack
    s.start_in_process()
    sim = slurm_clusters[0]
    cluster = {
        "apiVersion": "skyshift.io/v1", "kind": "Cluster",
        "metadata": {"name": "svc-slurm", "uid": str(uuid.uuid4()), "generation": 1,
                     "creationTimestamp": now_iso()},
        "spec": {"manager": "slurm",
                 "config": sim.adapter_config(sim.root / "work" / f"svc-{uuid.uuid4().hex[:6]}")},
        "status": {"phase": "Init"},
    }
    await starter.ensure_lifecycle(s.client, await s.store.create("clusters", cluster))
    await s.cluster_phase("svc-slurm", "Ready")
    await add_service(s, "on-slurm", selector={"app": "hpc"}, primaryCluster="svc-slurm")
    failed = await service_phase(s, "on-slurm", "Failed")
    message = failed["status"]["message"]
    assert "cannot create service on cluster svc-slurm" in message
    assert "Slurm clusters have no services; put the service on a Kubernetes cluster" in message
    assert failed["status"]["workflowId"] == service_workflow_id("default", "on-slurm")
    assert failed["status"]["clusterIP"] == "" and failed["status"]["cluster"] == ""
    await asyncio.sleep(2)  # no retry loop: one attempt, however long it waits
    assert await apply_attempts(s.client, service_workflow_id("default", "on-slurm")) == 1
    await delete_and_wait_gone(s, "on-slurm")
    await s.delete("clusters", "svc-slurm")


async def test_service_in_front_of_local_replicas(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("svc-local")
    await s.cluster_phase("svc-local", "Ready")
    await add_service(s, "early", selector={"app": "api"})
    pending = await service_phase(s, "early", "Pending")
    assert "app=api" in pending["status"]["message"]
    await s.submit("api", "sleep 600", labels={"app": "api"}, replicas=2,
                   restartPolicy="Never")
    await s.job_phase("api", "Running")
    # the primary cluster is where the replicas are: local, where HAProxy fronts them (these
    # replicas declare no port 8080, so there is nothing behind it yet)
    require_binary("haproxy", "apt-get install haproxy")
    ready = await service_phase(s, "early", "Ready", timeout=60)
    assert ready["status"]["cluster"] == "svc-local"
    assert ready["status"]["clusterIP"].startswith("127.77.")
    assert "HAProxy on" in ready["status"]["message"]

    async def counted() -> dict[str, Any] | None:
        ep = await s.get("endpoints", "early", "default")
        got = ((ep or {}).get("spec") or {}).get("endpoints") or {}
        return ep if (got.get("svc-local") or {}).get("num_endpoints") == 2 else None

    ep = await s.wait("endpoints count the running replicas", counted, timeout=40)
    assert ep["spec"]["selector"] == {"app": "api"}
    await delete_and_wait_gone(s, "early")
    await s.delete("jobs", "api", "default")
    # the whole recorded lifecycle (Pending, Failed, refreshes, teardown) replays
    handle = s.client.get_workflow_handle(service_workflow_id("default", "early"))
    assert await handle.result() == "Deleted"
    replayer = Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER)
    await replayer.replay_workflow(await handle.fetch_history())
