"""Helpers of the Kubernetes end-to-end tests: the stack as a user sees it, plus direct looks at
what each simulated cluster's kube-apiserver holds.

:class:`K8sE2E` creates Jobs through the API (admin token), runs ``skyctl`` as a subprocess
against the same server, and reads pods/Deployments/ReplicaSets straight from the apiservers of
the simulated clusters (``skyshift sim k8s``), by the labels the ``k8`` adapter puts on every
object it creates. Every wait is a poll with a deadline; nothing here measures time.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.compat.kubernetes.objects import JOB_UID, MANAGED_SELECTOR, RANK
from skyshift.contract.jobs import replica_name
from skyshift.devstack.sim.k8s import SimK8sCluster
from tests.fixtures.stack import DevStack, skyctl_argv

Obj = dict[str, Any]
K8S_NAMESPACE = "skyshift"  # the adapter's default: every replica of every job goes there
KINDS = {
    "pods": f"/api/v1/namespaces/{K8S_NAMESPACE}/pods",
    "deployments": f"/apis/apps/v1/namespaces/{K8S_NAMESPACE}/deployments",
    "replicasets": f"/apis/apps/v1/namespaces/{K8S_NAMESPACE}/replicasets",
}


def counts(job: Obj, cluster: str) -> dict[str, int]:
    """``status.replicaStatus[cluster]`` (state -> count), empty when absent."""
    return dict(((job.get("status") or {}).get("replicaStatus") or {}).get(cluster) or {})


def placement(job: Obj) -> dict[str, int]:
    return {c: n for c, n in ((job.get("status") or {}).get("placement") or {}).items() if n}


def holds(cluster: Obj, cpus: float, memory_mb: float) -> int:
    """How many replicas of that size the cluster's free nodes take (what the scheduler counts)."""
    total = 0
    for node in ((cluster.get("status") or {}).get("allocatable") or {}).values():
        by_cpu = int(node["cpus"] // cpus + 1e-9) if cpus else 10**6
        by_mem = int(node["memory"] // memory_mb + 1e-9) if memory_mb else 10**6
        total += min(by_cpu, by_mem)
    return total


def expected_spread(room: dict[str, int], replicas: int,
                    preference: dict[str, int] | None = None) -> dict[str, int]:
    """The scheduler's documented rule: rank by preference, then headroom, then name; fill the
    best cluster, spill the rest to the next (scheduler/core.py)."""
    preference = preference or {}
    order = sorted(room, key=lambda c: (-preference.get(c, 0), -room[c], c))
    out: dict[str, int] = {}
    left = replicas
    for c in order:
        if left == 0 or room[c] == 0:
            continue
        out[c] = min(room[c], left)
        left -= out[c]
    assert left == 0, f"{replicas} replicas do not fit in {room}"
    return out


@dataclass
class K8sE2E:
    """The stack (API with auth, workers) and the three simulated clusters."""

    stack: DevStack
    token: str
    api: AsyncSkyShiftClient
    sims: dict[str, SimK8sCluster]  # SkyShift cluster name -> simulated cluster
    cli_home: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    jobs: list[str] = field(default_factory=list)

    # ---- objects ------------------------------------------------------------------------------

    def job_name(self, base: str) -> str:
        return f"{base}-{self.run_id}"

    async def submit(self, name: str, *, replicas: int = 1, cpus: float = 1,
                     memory: float = 256, restart: str = "Never", duration: str | None = None,
                     exit_code: int | None = None, filters: list[Obj] | None = None,
                     preferences: list[Obj] | None = None, **spec: Any) -> Obj:
        """A Job allowed only on this run's Kubernetes clusters (never on the stack's ``local``
        cluster) unless ``filters`` says otherwise; ``duration`` ends each pod after that long
        (the simulator's ``SKYSHIFT_SIM_DURATION``), ``exit_code`` makes it fail."""
        envs = dict(spec.pop("envs", {}))
        if duration is not None:
            envs["SKYSHIFT_SIM_DURATION"] = duration
        if exit_code is not None:
            envs["SKYSHIFT_SIM_EXIT_CODE"] = str(exit_code)
        obj = await self.api.create({
            "kind": "Job",
            "metadata": {"name": name, "labels": {"e2e-run": self.run_id}},
            "spec": {
                "run": "sleep 3600", "replicas": replicas, "restartPolicy": restart,
                "resources": {"cpus": cpus, "memory": memory}, "envs": envs,
                "placement": {
                    "filters": filters if filters is not None
                    else [{"matchLabels": {"e2e-k8s": self.run_id}}],
                    "preferences": preferences or [],
                },
                **spec,
            },
        })
        self.jobs.append(name)
        return obj

    async def get(self, kind: str, name: str) -> Obj | None:
        try:
            return await self.api.get(kind, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def delete(self, kind: str, name: str) -> None:
        try:
            await self.api.delete(kind, name)
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def cleanup_jobs(self, timeout: float = 120.0) -> None:
        """Delete every job this run created and wait until they are gone."""
        for name in self.jobs:
            await self.delete("jobs", name)
        for name in self.jobs:
            await self.gone("jobs", name, timeout)
        self.jobs.clear()

    # ---- waiting ------------------------------------------------------------------------------

    async def wait(self, what: str, check: Callable[[], Awaitable[Any]],
                   timeout: float = 90.0, every: float = 0.25) -> Any:
        """Poll ``await check()`` until it returns something truthy (bounded)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = await check()
            if last:
                return last
            await asyncio.sleep(every)
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last})")

    async def phase(self, kind: str, name: str, *phases: str, timeout: float = 90.0) -> Obj:
        """Wait until the object's phase is one of ``phases``; return the object."""
        seen: list[Obj | None] = [None]

        async def check() -> Obj | None:
            obj = seen[0] = await self.get(kind, name)
            return obj if obj and (obj.get("status") or {}).get("phase") in phases else None

        try:
            found: Obj = await self.wait(f"{kind} {name} {'/'.join(phases)}", check, timeout)
            return found
        except AssertionError:
            status = (seen[0] or {}).get("status")
            raise AssertionError(
                f"{kind} {name} not {'/'.join(phases)} in {timeout:g}s: {status}") from None

    async def gone(self, kind: str, name: str, timeout: float = 90.0) -> None:
        async def check() -> bool:
            return await self.get(kind, name) is None

        await self.wait(f"{kind} {name} removed", check, timeout)

    # ---- the simulated clusters' apiservers ----------------------------------------------------

    async def k8s(self, cluster: str, kind: str, uid: str) -> list[Obj]:
        """Objects of ``kind`` (pods, deployments, replicasets) of the job ``uid`` as the
        cluster's kube-apiserver has them (terminating ones included)."""
        sim = self.sims[cluster]
        tls = ssl.create_default_context(cafile=str(sim.ca_file))
        async with httpx.AsyncClient(base_url=sim.server, verify=tls, timeout=10.0,
                                     headers={"Authorization": f"Bearer {sim.token}"}) as http:
            resp = await http.get(KINDS[kind],
                                  params={"labelSelector": f"{MANAGED_SELECTOR},{JOB_UID}={uid}"})
            if resp.status_code == 404:  # the namespace does not exist (yet)
                return []
            resp.raise_for_status()
            items: list[Obj] = resp.json()["items"]
            return items

    async def pods_by_cluster(self, uid: str, clusters: list[str] | None = None,
                              ) -> dict[str, list[Obj]]:
        return {c: await self.k8s(c, "pods", uid) for c in clusters or sorted(self.sims)}

    async def everything(self, uid: str) -> dict[str, dict[str, list[str]]]:
        """cluster -> kind -> names of every object of the job on every cluster."""
        out: dict[str, dict[str, list[str]]] = {}
        for cluster in sorted(self.sims):
            out[cluster] = {kind: sorted(o["metadata"]["name"] for o in
                                         await self.k8s(cluster, kind, uid)) for kind in KINDS}
        return out

    # ---- skyctl -------------------------------------------------------------------------------

    def skyctl_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SKYSHIFT_DEBUG"}
        env.update(SKYSHIFT_HOME=str(self.cli_home), SKYSHIFT_SERVER=self.stack.api_url,
                   SKYSHIFT_TOKEN=self.token)
        return env

    async def skyctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``skyctl ARGS`` as a user runs it (own home, the stack's server, the admin token)."""
        return await asyncio.to_thread(
            subprocess.run, [*skyctl_argv(), *args], env=self.skyctl_env(), cwd=self.cli_home,
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )


def ranks_of(pods: list[Obj]) -> list[int]:
    return sorted(int(p["metadata"]["labels"][RANK]) for p in pods)


def names_of(job: Obj, ranks: range) -> list[str]:
    return [replica_name(job["metadata"]["name"], job["metadata"]["uid"], r) for r in ranks]


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def live(pods: list[Obj]) -> list[Obj]:
    """Pods not being deleted."""
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]
