"""Ray end to end: Jobs through the whole stack onto real Ray heads (``ray start --head``).

A private ``skyshift up`` (Temporal dev server, etcd, API with auth on, control worker, skylet
manager and its ``local`` cluster) on free ports, Ray heads started through ``skyshift sim ray``
(``tests.fixtures.ray``), and everything done the way a user does it: Cluster and Job objects
created through the API with the admin token, logs through the API and ``skyctl logs``, and
what Ray itself says read with its own ``JobSubmissionClient``.

Clusters get labels (``e2e=<name>``) and every job filters on them, so each test knows where its
replicas may go. Every wait is a poll with a deadline; nothing asserts how long something took.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.contract.jobs import replica_name
from skyshift.devstack.sim.ray import SimRayCluster
from tests.fixtures.auth import admin_token
from tests.fixtures.stack import DevStack, skyctl_argv, stack_up

pytest_plugins = ["tests.fixtures.ray"]
pytestmark = pytest.mark.integration
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def ray_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with stack_up(tmp_path_factory.mktemp("e2e-ray-home")) as stack:
        yield stack


@dataclass
class E2E:
    stack: DevStack
    api: AsyncSkyShiftClient
    token: str
    jobs: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    last: Obj = field(default_factory=dict)

    async def add_ray_cluster(self, name: str, sim: SimRayCluster) -> Obj:
        obj = await self.api.create({
            "kind": "Cluster",
            "metadata": {"name": name, "labels": {"e2e": name}},
            "spec": {"manager": "ray", "config": sim.adapter_config()},
        })
        self.clusters.append(name)
        return obj

    async def submit(self, name: str, run: str, clusters: list[str], cpus: float,
                     **spec: Any) -> Obj:
        placement = dict(spec.pop("placement", {}))
        placement["filters"] = [{"matchLabels": {"e2e": c}} for c in clusters]
        obj = await self.api.create({
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"run": run, "resources": {"cpus": cpus}, "placement": placement, **spec},
        })
        self.jobs.append(name)
        return obj

    async def skyctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``skyctl ARGS`` as a user runs it (a home of its own, the stack's server and token)."""
        home = self.stack.home / "skyctl-user"
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "SKYSHIFT_DEBUG"}
        env.update(SKYSHIFT_HOME=str(home), SKYSHIFT_SERVER=self.stack.api_url,
                   SKYSHIFT_TOKEN=self.token)
        return await asyncio.to_thread(
            subprocess.run, [*skyctl_argv(), *args], env=env, cwd=home, capture_output=True,
            text=True, timeout=120, stdin=subprocess.DEVNULL,
        )

    async def get(self, kind: str, name: str) -> Obj | None:
        try:
            obj = await self.api.get(kind, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            obj = None
        self.last = {"object": f"{kind}/{name}", "status": (obj or {}).get("status")}
        return obj

    async def wait(self, what: str, check: Callable[[], Awaitable[Any]],
                   timeout: float = 180.0) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = await check()
            if last:
                return last
            await asyncio.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last}; "
                             f"last object read: {self.last})")

    async def phase(self, kind: str, name: str, phase: str, timeout: float = 180.0) -> Obj:
        async def check() -> Obj | None:
            obj = await self.get(kind, name)
            return obj if obj and (obj.get("status") or {}).get("phase") == phase else None

        found: Obj = await self.wait(f"{kind} {name} {phase}", check, timeout)
        return found


def counts(job: Obj, cluster: str) -> dict[str, int]:
    return dict(((job.get("status") or {}).get("replicaStatus") or {}).get(cluster) or {})


def fits(cluster: Obj, cpus: float) -> int:
    return sum(int(n["cpus"] // cpus) for n in cluster["status"]["allocatable"].values())


def ray_jobs(sim: SimRayCluster) -> dict[str, str]:
    """submission id -> status, as Ray itself reports them."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(sim.address)
    return {str(j.submission_id): str(j.status.value) for j in client.list_jobs()}


@pytest_asyncio.fixture(scope="module")
async def e2e(ray_stack: DevStack) -> AsyncIterator[E2E]:
    token = admin_token(ray_stack.api_url, ray_stack.home)
    api = AsyncSkyShiftClient(ray_stack.api_url, token=token, namespace="default", timeout=60)
    env = E2E(ray_stack, api, token)
    try:
        await env.phase("clusters", "local", "Ready")
        await api.patch("clusters", "local", None, {"metadata": {"labels": {"e2e": "local"}}})
        yield env
    finally:
        for name in env.jobs:
            with contextlib.suppress(ApiError):
                await api.delete("jobs", name)
        await api.aclose()


async def test_job_spreads_over_local_and_ray_with_logs(e2e: E2E,
                                                        ray_cluster: SimRayCluster) -> None:
    await e2e.add_ray_cluster("e2e-ray", ray_cluster)
    ray_obj = await e2e.phase("clusters", "e2e-ray", "Ready")
    local = await e2e.get("clusters", "local")
    assert local
    cpus = 2.0
    on_ray, on_local = fits(ray_obj, cpus), fits(local, cpus)
    assert on_ray >= 1 and on_local >= 1, (ray_obj["status"], local["status"])
    replicas = max(on_ray, on_local) + 1  # more than either holds alone
    assert replicas <= on_ray + on_local
    name = f"wide-{e2e.run_id}"
    job = await e2e.submit(name, "echo rank $SKYSHIFT_RANK on $SKYSHIFT_REPLICA; sleep 2",
                           ["e2e-ray", "local"], cpus=cpus, replicas=replicas,
                           restartPolicy="Never")
    running = await e2e.phase("jobs", name, "Running")
    placement = running["status"]["placement"]
    assert set(placement) == {"e2e-ray", "local"}, placement
    assert sum(placement.values()) == replicas
    done = await e2e.phase("jobs", name, "Succeeded")
    assert {c: counts(done, c)["Succeeded"] for c in placement} == placement
    names = [replica_name(name, job["metadata"]["uid"], r) for r in range(replicas)]
    # what Ray says: the replicas placed there are its jobs, by their names, succeeded
    on_ray_jobs = {k: v for k, v in ray_jobs(ray_cluster).items() if k in names}
    assert len(on_ray_jobs) == placement["e2e-ray"]
    assert set(on_ray_jobs.values()) == {"SUCCEEDED"}
    # logs from both clusters, through the API and through `skyctl logs` itself
    logs = await e2e.api.logs(name)
    cli = await e2e.skyctl("logs", name)
    assert cli.returncode == 0, cli.stderr
    for rank, replica in enumerate(names):
        assert f"==> {replica} <==\nrank {rank} on {replica}\n" in logs
        assert f"==> {replica} <==\nrank {rank} on {replica}\n" in cli.stdout


async def test_killed_ray_head_fails_over_to_local(e2e: E2E,
                                                   fresh_ray_cluster: SimRayCluster) -> None:
    sim = fresh_ray_cluster
    await e2e.add_ray_cluster("e2e-ray-doomed", sim)
    await e2e.phase("clusters", "e2e-ray-doomed", "Ready")
    name = f"mover-{e2e.run_id}"
    job = await e2e.submit(
        name, "echo started rank $SKYSHIFT_RANK; sleep 600", ["e2e-ray-doomed", "local"],
        cpus=0.5, replicas=1, restartPolicy="Always",
        placement={"preferences": [{"matchLabels": {"e2e": "e2e-ray-doomed"}, "weight": 10}]},
    )

    async def running_on_ray() -> Obj | None:
        obj = await e2e.get("jobs", name)
        ok = obj and obj["status"].get("placement") == {"e2e-ray-doomed": 1} and counts(
            obj, "e2e-ray-doomed").get("Running") == 1
        return obj if ok else None

    await e2e.wait("the replica running on the Ray cluster", running_on_ray)
    [replica] = [replica_name(name, job["metadata"]["uid"], 0)]
    assert ray_jobs(sim).get(replica) == "RUNNING"
    sim.kill()  # kill -9 of the head's processes (GCS, raylet, dashboard, the entrypoint)
    assert sim.processes() == []
    error = await e2e.phase("clusters", "e2e-ray-doomed", "Error")
    assert "e2e-ray-doomed" in error["status"]["message"]

    async def on_local() -> Obj | None:
        obj = await e2e.get("jobs", name)
        ok = obj and obj["status"].get("placement") == {"local": 1} and counts(
            obj, "local").get("Running") == 1
        return obj if ok else None

    moved = await e2e.wait("the replica moved to local and running", on_local)
    assert moved["status"]["phase"] == "Running"

    async def logged() -> str | None:
        text = await e2e.api.logs(name)
        return text if "started rank 0" in text else None

    assert f"==> {replica} <==" in await e2e.wait("logs of the moved replica", logged)
