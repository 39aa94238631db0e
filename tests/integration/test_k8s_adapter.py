"""The ``k8`` adapter against three simulated clusters: spreading, completion, idempotency,
cleanup, faults, GPUs, Deployments, logs and exec.

Every wait polls with a bounded deadline; nothing asserts how long something took.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import yaml

from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.kubernetes.adapter import KubernetesManager
from skyshift.compat.kubernetes.objects import JOB_UID, MANAGED_SELECTOR
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec
from skyshift.devstack.sim.k8s import DELAY_ANNOTATION, DURATION_ENV, EXIT_CODE_ENV, SimK8sCluster
from skyshift.models.quantity import Resources

pytest_plugins = ["tests.fixtures.k8s"]
pytestmark = pytest.mark.integration

DEADLINE = 60.0
ConfigFor = Callable[..., dict[str, Any]]


def specs_for(job: str, uid: str, ranks: range, **kw: Any) -> list[ReplicaSpec]:
    kw.setdefault("resources", Resources(cpus=0.5, memory=64))
    return [ReplicaSpec(name=f"{job}-{uid[:8]}-{r}", job_name=job, namespace="default",
                        job_uid=uid, rank=r, run="sleep 600", **kw) for r in ranks]


def new_uid() -> str:
    return uuid.uuid4().hex


async def eventually(check: Callable[[], Awaitable[bool]], what: str,
                     deadline: float = DEADLINE, manager: KubernetesManager | None = None) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if await check():
            return
        await asyncio.sleep(0.1)
    detail = ""
    if manager is not None:  # what the cluster says, to tell a slow cluster from a wrong state
        pods = await asyncio.to_thread(
            manager.api.request, "GET", f"/api/v1/namespaces/{manager.settings.namespace}/pods")
        detail = "; ".join(
            f"{p['metadata']['name']}: {p['status'].get('phase')} "
            f"{(p['status'].get('containerStatuses') or [{}])[0].get('state')}"
            for p in pods["items"])
    raise AssertionError(f"never happened: {what}; pods: {detail}")


async def states(manager: KubernetesManager, uid: str) -> dict[str, str]:
    return {s.name: s.state for s in await manager.replicas() if s.job_uid == uid}


async def objects(manager: KubernetesManager, uid: str) -> dict[str, list[str]]:
    """Every object carrying the job's label, straight from the API (pods, Deployments, RSs)."""
    query = {"labelSelector": f"{MANAGED_SELECTOR},{JOB_UID}={uid}"}
    ns = manager.settings.namespace
    out = {}
    for kind, path in (("pods", f"/api/v1/namespaces/{ns}/pods"),
                       ("deployments", f"/apis/apps/v1/namespaces/{ns}/deployments"),
                       ("replicasets", f"/apis/apps/v1/namespaces/{ns}/replicasets")):
        found = await asyncio.to_thread(manager.api.request, "GET", path, query)
        out[kind] = sorted(o["metadata"]["name"] for o in found["items"])
    return out


@pytest.fixture
async def managers(
    k8s_clusters: list[SimK8sCluster], k8s_config: ConfigFor
) -> AsyncIterator[Callable[..., Awaitable[KubernetesManager]]]:
    """Builds connected managers (``index`` picks the cluster); closes them at the end."""
    made: list[KubernetesManager] = []

    async def build(index: int = 0, **overrides: Any) -> KubernetesManager:
        cluster = k8s_clusters[index]
        manager = KubernetesManager(cluster.name, k8s_config(cluster, **overrides))
        await manager.connect()
        made.append(manager)
        return manager

    yield build
    for manager in made:
        await manager.close()


async def test_twelve_replicas_spread_over_three_clusters_run_then_succeed(managers):
    # the annotation every pod gets on these clusters makes kwok complete it after 3s
    clusters = [await managers(i, annotations={DELAY_ANNOTATION: "3s"}) for i in range(3)]
    uid = new_uid()
    specs = specs_for("spread", uid, range(12))
    placement = {i: [s for s in specs if s.rank % 3 == i] for i in range(3)}
    for i, manager in enumerate(clusters):
        submitted = await manager.submit(placement[i])
        assert [s.name for s in submitted] == [s.name for s in placement[i]]
    seen_running: set[str] = set()

    async def all_succeeded() -> bool:
        done = True
        for i, manager in enumerate(clusters):
            now = await states(manager, uid)
            assert set(now) == {s.name for s in placement[i]}, now  # each cluster: only its 4
            seen_running.update(n for n, st in now.items() if st in (RUNNING, SUCCEEDED))
            done = done and all(st == SUCCEEDED for st in now.values())
        return done

    await eventually(all_succeeded, "all 12 replicas Succeeded")
    assert len(seen_running) == 12
    for manager in clusters:
        for status in await manager.replicas():
            if status.job_uid == uid:
                assert status.exit_code == 0 and status.reason == "Completed"
                assert status.started_at and status.finished_at
                assert status.finished_at >= status.started_at
    for i, manager in enumerate(clusters):
        assert sorted(await manager.delete_job(uid)) == sorted(s.name for s in placement[i])


async def test_replica_runs_before_it_completes_after_its_delay(managers):
    manager = await managers(1)
    uid = new_uid()
    [spec] = specs_for("delay", uid, range(1), envs={DURATION_ENV: "2s"})
    await manager.submit([spec])
    await eventually(lambda: _state_is(manager, uid, spec.name, RUNNING), "Running")
    await eventually(lambda: _state_is(manager, uid, spec.name, SUCCEEDED), "Succeeded")
    await manager.delete_job(uid)


async def _state_is(manager: KubernetesManager, uid: str, name: str, state: str) -> bool:
    return (await states(manager, uid)).get(name) == state


async def test_submit_is_idempotent_no_duplicate_pods(managers):
    first, second = await managers(0), await managers(0)
    uid = new_uid()
    specs = specs_for("idem", uid, range(4))
    results = await asyncio.gather(*(m.submit(specs) for m in (first, second, first, second)))
    for batch in results:
        assert [s.name for s in batch] == [s.name for s in specs]
    found = await objects(first, uid)
    assert found["pods"] == sorted(s.name for s in specs)
    await first.delete_job(uid)


async def test_name_taken_by_another_job_is_permanent(managers):
    manager = await managers(0)
    uid = new_uid()
    [spec] = specs_for("taken", uid, range(1))
    await manager.submit([spec])
    thief = ReplicaSpec(**{**spec.__dict__, "job_uid": new_uid()})
    with pytest.raises(Permanent, match="taken"):
        await manager.submit([thief])
    await manager.delete_job(uid)


async def test_restart_with_higher_attempt_replaces_the_pod(managers):
    manager = await managers(0)
    uid = new_uid()
    [failing] = specs_for("restart", uid, range(1), envs={EXIT_CODE_ENV: "5"})
    await manager.submit([failing])
    await eventually(lambda: _state_is(manager, uid, failing.name, FAILED), "Failed",
                     manager=manager)
    [status] = [s for s in await manager.replicas() if s.name == failing.name]
    assert status.exit_code == 5 and status.attempt == 0
    again = ReplicaSpec(**{**failing.__dict__, "attempt": 1, "envs": {}})
    [resubmitted] = await manager.submit([again])
    assert resubmitted.attempt == 1 and resubmitted.state == PENDING

    async def running_attempt_1() -> bool:
        found = [s for s in await manager.replicas() if s.name == failing.name]
        return bool(found) and found[0].state == RUNNING and found[0].attempt == 1

    await eventually(running_attempt_1, "attempt 1 Running")
    assert (await objects(manager, uid))["pods"] == [failing.name]
    await manager.delete_job(uid)


async def test_deployment_replica_and_delete_job_removes_every_object(managers):
    manager = await managers(2)
    uid = new_uid()
    specs = specs_for("mixed", uid, range(2), restart_policy="Always")
    specs += specs_for("mixed", uid, range(2, 4))
    await manager.submit(specs)
    await eventually(
        lambda: _all(manager, uid, RUNNING, 4), "2 Deployment and 2 bare replicas Running"
    )
    found = await objects(manager, uid)
    assert found["deployments"] == [specs[0].name, specs[1].name]
    assert len(found["replicasets"]) == 2 and len(found["pods"]) == 4
    again = await manager.submit(specs)  # adopts both kinds
    assert {s.state for s in again} == {RUNNING}

    removed = await manager.delete_job(uid)
    assert removed == sorted(s.name for s in specs)
    assert await states(manager, uid) == {}

    async def nothing_left() -> bool:
        return not any((await objects(manager, uid)).values())

    await eventually(nothing_left, "no pod, Deployment or ReplicaSet of the job")
    assert await manager.delete_job(uid) == []


async def _all(manager: KubernetesManager, uid: str, state: str, count: int) -> bool:
    now = await states(manager, uid)
    return len(now) == count and set(now.values()) == {state}


async def test_gpu_capacity_and_accelerator_placement(managers):
    manager = await managers(1)
    state = await manager.state()
    assert state.capacity().gpus == 4 and state.capacity().accelerators == {"A100": 4}
    uid = new_uid()
    [spec] = specs_for("gpu", uid, range(1),
                       resources=Resources(cpus=1, memory=128, accelerators={"A100": 2}))
    await manager.submit([spec])
    await eventually(lambda: _state_is(manager, uid, spec.name, RUNNING), "GPU replica Running")

    async def two_gpus_taken() -> bool:
        return bool((await manager.state()).allocatable().accelerators == {"A100": 2})

    await eventually(two_gpus_taken, "allocatable A100 drops by 2")
    pod = await asyncio.to_thread(
        manager.api.request, "GET", f"/api/v1/namespaces/skyshift/pods/{spec.name}")
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                            "values": ["NVIDIA-A100-SXM4-80GB"]}]}]
    [h100] = specs_for("gpu-h100", uid, range(1, 2),
                       resources=Resources(cpus=1, memory=128, accelerators={"H100": 1}))
    with pytest.raises(Permanent, match="H100"):
        await manager.submit([h100])
    await manager.delete_job(uid)


async def test_logs_and_exec_reach_a_pod(managers):
    manager = await managers(1)
    uid = new_uid()
    [spec] = specs_for("debug", uid, range(1))
    await manager.submit([spec])
    await eventually(lambda: _state_is(manager, uid, spec.name, RUNNING), "Running")
    logs = await manager.logs(spec.name)
    assert "simulated container on kwok cluster sim-k8s-2" in logs
    assert await manager.logs(spec.name, tail=0) == ""
    result = await manager.exec(spec.name, ["sh", "-c", "echo hello; exit 4"])
    assert result.exit_code == 4 and result.stdout == "hello\n"
    with pytest.raises(NotFound):
        await manager.logs("no-such-replica-0")
    await manager.delete_job(uid)
    with pytest.raises(NotFound):
        await manager.exec(spec.name, ["true"])


async def test_apiserver_down_is_transient_and_recovers(managers, k8s_clusters):
    cluster = k8s_clusters[2]
    manager = await managers(2)
    uid = new_uid()
    [spec] = specs_for("fault", uid, range(1))
    await manager.submit([spec])
    await eventually(lambda: _state_is(manager, uid, spec.name, RUNNING), "Running")
    assert manager._cache is not None
    await asyncio.to_thread(cluster.stop_apiserver)
    try:
        with pytest.raises(Transient):
            await manager.state()
        [other] = specs_for("fault", uid, range(1, 2))
        with pytest.raises(Transient):
            await manager.submit([other])

        async def replicas_transient() -> bool:
            try:
                await manager.replicas()
            except Transient:
                return True
            return False

        await eventually(replicas_transient, "replicas() raises Transient (watch noticed)")
        fresh = KubernetesManager(cluster.name, dict(manager.settings.__dict__))
        with pytest.raises(Transient):
            await fresh.connect()
        await fresh.close()
    finally:
        await asyncio.to_thread(cluster.start_apiserver)
    assert (await states(manager, uid)) == {spec.name: RUNNING}  # kept running meanwhile
    await eventually(lambda: asyncio.to_thread(manager._cache.fresh), "watch reconnected")
    await manager.delete_job(uid)


async def test_bad_config_and_bad_token_are_permanent(k8s_clusters, k8s_config, tmp_path):
    cluster = k8s_clusters[0]
    bad = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in bad["users"]:
        user["user"]["token"] = "not-the-token"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(bad))
    intruder = KubernetesManager("x", k8s_config(cluster, kubeconfig=str(tmp_path / "kubeconfig")))
    with pytest.raises(Permanent, match="401"):
        await intruder.connect()
    await intruder.close()
    with pytest.raises(Permanent, match="namespace"):
        KubernetesManager("x", k8s_config(cluster, namespace="Not_A_Label"))
    with pytest.raises(Permanent, match="unknown setting"):
        KubernetesManager("x", k8s_config(cluster, nmespace="typo"))
    manager = KubernetesManager("x", k8s_config(cluster, context="no-such-context"))
    with pytest.raises(Permanent, match="no-such-context"):
        await manager.connect()
    token = KubernetesManager("x", k8s_config(cluster, create_namespace=False,
                                              namespace="absent-ns"))
    with pytest.raises(Permanent, match="absent-ns"):
        await token.connect()
    await token.close()
