"""Quotas on the real test beds: a kube-apiserver with kwok nodes (``skyshift sim k8s``) and a
Slurm cluster (real slurmctld/slurmd), attached to a stack of real parts.

The stack: the session's etcd (a key prefix of this test's) and Temporal dev server, the control
worker and skylet manager in process (``lifecycle_stack``), and the API server as its own
process with auth on. Everything a user does goes through ``skyctl`` (attach the cluster, create
namespaces, quotas and jobs, delete a job, ``get``/``describe``); what the clusters really run is
read from the bed itself: pods from the kube-apiserver, jobs from ``squeue``. A sampler polls the
bed for the whole test and records the most replicas it ever saw live at once, so "the bound
held" is checked over the run, not at one instant. Waits are polls with deadlines; nothing
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from skyshift.compat.errors import NotFound
from skyshift.compat.kubernetes.adapter import KubernetesManager
from skyshift.compat.kubernetes.objects import JOB_UID, MANAGED_SELECTOR, NAMESPACE
from skyshift.devstack.sim.k8s import SimK8sCluster
from skyshift.devstack.sim.slurm import SimSlurmCluster
from tests.fixtures.auth import admin_token
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_cli import Run, Skyctl, free_port, wait_healthy

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.timeout(600)]

Obj = dict[str, Any]
K8S_NAMESPACE = "skyshift"  # where the k8 adapter puts every replica


# ---- the stack, as a user reaches it --------------------------------------------------------


@dataclass
class QuotaBed:
    """The stack (workers in process, API as a process) and ``skyctl`` against it."""

    stack: LifecycleStack
    ctl: Skyctl
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    jobs: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name) created

    async def skyctl(self, *args: str, stdin: str | None = None) -> Run:
        """``skyctl ARGS`` (must succeed), off the event loop the workers run on."""
        return await asyncio.to_thread(self.ctl.ok, *args, stdin=stdin)

    def ns(self, base: str) -> str:
        return f"{base}-{self.run_id}"

    async def namespace(self, base: str) -> str:
        name = self.ns(base)
        await self.skyctl("create", "namespace", name)
        return name

    async def job(
        self,
        name: str,
        ns: str,
        run: str,
        *,
        cpus: int = 1,
        replicas: int = 1,
        priority: int = 0,
    ) -> Obj:
        """``skyctl create job`` (restart policy Never); returns the stored job."""
        await self.skyctl(
            "create",
            "job",
            name,
            "-n",
            ns,
            "--run",
            run,
            "--cpus",
            str(cpus),
            "--replicas",
            str(replicas),
            "--priority",
            str(priority),
            "--restart_policy",
            "Never",
        )
        self.jobs.append((ns, name))
        obj = await self.stack.get("jobs", name, ns)
        assert obj is not None
        return obj

    async def quota_yaml(self, name: str, ns: str) -> Obj:
        got: Obj = yaml.safe_load(
            (await self.skyctl("get", "quota", name, "-n", ns, "-o", "yaml")).out
        )
        return got

    async def quota_shows(
        self, name: str, ns: str, used: dict[str, float], borrowed: dict[str, float] | None = None
    ) -> Obj:
        """Wait until ``skyctl get quota -o yaml`` shows this usage (and borrowing)."""

        async def check() -> Obj | None:
            obj = await self.quota_yaml(name, ns)
            status = obj.get("status") or {}
            ok = status.get("used") == used and (status.get("borrowed") or {}) == (borrowed or {})
            return obj if ok else None

        found: Obj = await self.stack.wait(f"quota {ns}/{name} used {used}", check, timeout=90)
        return found

    async def waiting(self, name: str, ns: str) -> Obj:
        """The job once it waits Pending for quota."""

        async def check() -> Obj | None:
            obj = await self.stack.get("jobs", name, ns)
            message = str(((obj or {}).get("status") or {}).get("message") or "")
            return obj if message.startswith("waiting for quota:") else None

        found: Obj = await self.stack.wait(f"job {ns}/{name} waits for quota", check, timeout=90)
        assert found["status"]["phase"] == "Pending"
        assert not found["status"].get("placement")
        return found

    async def cleanup(self) -> None:
        """Delete every job this test created and wait until each is gone (its replicas
        removed from the bed), while the workers still run."""
        for ns, name in self.jobs:
            await asyncio.to_thread(self.ctl, "delete", "job", name, "-n", ns)
        for ns, name in self.jobs:

            async def gone(ns: str = ns, name: str = name) -> bool:
                return await self.stack.get("jobs", name, ns) is None

            await self.stack.wait(f"job {ns}/{name} gone", gone, timeout=120)


@pytest.fixture
async def bed(lifecycle_stack: LifecycleStack, tmp_path: Path) -> AsyncIterator[QuotaBed]:
    """Workers in process; ``python -m skyshift.api`` on the same etcd prefix and Temporal;
    a ``skyctl`` home logged in as admin."""
    s = lifecycle_stack
    s.start_in_process()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "api.log"
    env = {**s.env(), "SKYSHIFT_API_HOST": "127.0.0.1", "SKYSHIFT_API_PORT": str(port)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skyshift.api"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await asyncio.to_thread(wait_healthy, url, proc, log, 90)
        token = await asyncio.to_thread(admin_token, url, s.tmp / "home")
        home = tmp_path / "cli-home"
        home.mkdir()
        ctl = Skyctl(url, home)
        ctl.env["SKYSHIFT_TOKEN"] = token
        b = QuotaBed(s, ctl)
        try:
            yield b
        finally:
            await b.cleanup()
    finally:
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def table(run: Run) -> tuple[list[str], list[str]]:
    """The header and the one row of a ``skyctl get`` table (cells are 2+ spaces apart)."""
    header, row = run.out.strip().splitlines()
    return re.split(r"\s{2,}", header.strip()), re.split(r"\s{2,}", row.strip())


def section(text: str, title: str) -> Obj:
    """One YAML section of ``skyctl describe`` output (the indented lines under ``title:``)."""
    lines = text.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")), len(lines))
    got: Obj = yaml.safe_load("\n".join(lines[start:end]))
    return got


# ---- what the beds run ------------------------------------------------------------------------


class Sampler:
    """Polls ``count()`` (what a bed runs now, by group) until stopped, keeping the maximum of
    each group and of their sum that it ever saw."""

    def __init__(self, count: Callable[[], Awaitable[dict[str, int]]]) -> None:
        self.count = count
        self.most: dict[str, int] = {}
        self.most_total = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            now = await self.count()
            for group, n in now.items():
                self.most[group] = max(self.most.get(group, 0), n)
            self.most_total = max(self.most_total, sum(now.values()))
            self.samples += 1
            await asyncio.sleep(0.2)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Sampler]:
        self._task = asyncio.create_task(self._run())
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            assert self.samples > 0, "the sampler never read the bed"


def kube(sim: SimK8sCluster, k8s_config: Callable[..., Obj]) -> KubernetesManager:
    return KubernetesManager(sim.name, k8s_config(sim, watch=False))


async def pods(manager: KubernetesManager, selector: str) -> list[Obj]:
    """Live pods (not being deleted, not finished) SkyShift made, as the apiserver has them."""
    try:
        got = await asyncio.to_thread(
            manager.api.request,
            "GET",
            f"/api/v1/namespaces/{K8S_NAMESPACE}/pods",
            {"labelSelector": f"{MANAGED_SELECTOR},{selector}"},
        )
    except NotFound:  # the adapter's namespace does not exist yet
        return []
    return [
        p
        for p in got["items"]
        if not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def pods_by_namespace(
    manager: KubernetesManager,
    *namespaces: str,
) -> Callable[[], Awaitable[dict[str, int]]]:
    async def count() -> dict[str, int]:
        return {ns: len(await pods(manager, f"{NAMESPACE}={ns}")) for ns in namespaces}

    return count


async def attach_k8s(b: QuotaBed, sim: SimK8sCluster) -> str:
    name = f"qk8-{b.run_id}"
    await b.skyctl(
        "create",
        "cluster",
        name,
        "--manager",
        "k8",
        "--config",
        str(sim.kubeconfig),
        "--context",
        sim.context,
    )
    await b.stack.cluster_phase(name, "Ready", timeout=120)
    return name


# ---- Kubernetes (kube-apiserver + kwok) -------------------------------------------------------


async def test_k8s_quota_holds_the_second_job_until_the_first_is_deleted(
    bed: QuotaBed,
    k8s_clusters: list[SimK8sCluster],
    k8s_config: Callable[..., Obj],
) -> None:
    """cpus=2: a 2-replica job of 1 CPU each fills it; a third CPU waits Pending naming the
    quota, though the cluster has 16 CPUs free; deleting the first job admits it."""
    b, sim = bed, k8s_clusters[1]
    cluster = await attach_k8s(b, sim)
    ns = await b.namespace("qk")
    made = await b.skyctl("create", "quota", "team", "-n", ns, "--hard", "cpus=2,jobs=5")
    assert made.out.strip() == "quota/team created"
    manager = kube(sim, k8s_config)
    try:
        async with Sampler(pods_by_namespace(manager, ns)).running() as sampler:
            first = await b.job("first", ns, "sleep 3600", replicas=2)
            await b.stack.job_phase("first", "Running", ns=ns, timeout=120)
            second = await b.job("second", ns, "sleep 3600")
            pending = await b.waiting("second", ns)
            assert pending["status"]["message"] == (
                f"waiting for quota: over Quota {ns}/team: cpus 2 of 2 used, needs 1 more"
            )
            job_text = (await b.skyctl("describe", "job", "second", "-n", ns)).out
            assert section(job_text, "Status")["message"] == pending["status"]["message"]
            await b.quota_shows("team", ns, {"cpus": 2.0, "jobs": 1.0})
            _, row = table(await b.skyctl("get", "quotas", "-n", ns))
            assert row[:4] == ["team", ns, "-", "cpus: 2/2, jobs: 1/5"], row
            quota_text = (await b.skyctl("describe", "quota", "team", "-n", ns)).out
            assert section(quota_text, "Spec")["hard"] == {"cpus": 2.0, "jobs": 5.0}
            assert section(quota_text, "Status")["used"] == {"cpus": 2.0, "jobs": 1.0}
            assert len(await pods(manager, f"{JOB_UID}={first['metadata']['uid']}")) == 2
            assert await pods(manager, f"{JOB_UID}={second['metadata']['uid']}") == []

            await b.skyctl("delete", "job", "first", "-n", ns)
            running = await b.stack.job_phase("second", "Running", ns=ns, timeout=120)
            assert running["status"]["placement"] == {cluster: 1}

            async def second_pod() -> list[Obj]:
                return await pods(manager, f"{JOB_UID}={second['metadata']['uid']}")

            await b.stack.wait("the second job's pod on the apiserver", second_pod, timeout=60)
            await b.quota_shows("team", ns, {"cpus": 1.0, "jobs": 1.0})
        assert sampler.most[ns] <= 2, f"{sampler.most[ns]} pods of {ns} live at once"
        assert sampler.most[ns] == 2  # the bound was reached, not merely never approached
    finally:
        await asyncio.to_thread(manager.api.close)


async def test_k8s_a_higher_priority_job_over_quota_evicts_its_namespace_low_job(
    bed: QuotaBed,
    k8s_clusters: list[SimK8sCluster],
    k8s_config: Callable[..., Obj],
) -> None:
    """cpus=2: a priority-0 gang of 2 pods holds the quota; a priority-10 job of 1 CPU evicts
    the gang whole (its pods deleted from the apiserver), runs, and the gang runs again once it
    is deleted; the namespace never has more than 2 live pods."""
    b, sim = bed, k8s_clusters[1]
    cluster = await attach_k8s(b, sim)
    ns = await b.namespace("qp")
    await b.skyctl("create", "quota", "team", "-n", ns, "--hard", "cpus=2")
    manager = kube(sim, k8s_config)
    async with Sampler(pods_by_namespace(manager, ns)).running() as sampler:
        gang = await b.job("gang", ns, "sleep 3600", replicas=2)
        await b.stack.job_phase("gang", "Running", ns=ns, timeout=120)
        urgent = await b.job("urgent", ns, "sleep 3600", priority=10)
        await b.stack.job_phase("urgent", "Running", ns=ns, timeout=120)

        async def gang_evicted() -> Obj | None:
            obj = await b.stack.get("jobs", "gang", ns)
            conditions = ((obj or {}).get("status") or {}).get("conditions") or []
            return obj if any(c.get("type") == "Preempted" for c in conditions) else None

        evicted = await b.stack.wait("the gang preempted", gang_evicted, timeout=90)
        assert evicted["status"]["phase"] == "Pending"
        shown = (await b.skyctl("describe", "job", "gang", "-n", ns)).out
        row = next(line for line in shown.splitlines() if line.strip().startswith("Preempted"))
        assert f"Preempted by {ns}/urgent: it has priority 10 and needs the capacity" in row
        gang_uid = f"{JOB_UID}={gang['metadata']['uid']}"
        assert await pods(manager, gang_uid) == []
        assert len(await pods(manager, f"{JOB_UID}={urgent['metadata']['uid']}")) == 1

        await b.skyctl("delete", "job", "urgent", "-n", ns)
        back = await b.stack.job_phase("gang", "Running", ns=ns, timeout=120)
        assert back["status"]["placement"] == {cluster: 2}

        async def gang_pods() -> list[Obj] | None:
            live = await pods(manager, gang_uid)
            return live if len(live) == 2 else None

        await b.stack.wait("the gang's 2 pods again", gang_pods, timeout=60)
    assert sampler.most[ns] == 2, f"{sampler.most[ns]} pods of {ns} live at once"


# ---- Slurm (real slurmctld/slurmd) ------------------------------------------------------------


def squeue_live(sim: SimSlurmCluster, marker: str) -> Callable[[], Awaitable[dict[str, int]]]:
    """The Slurm jobs whose name has ``marker`` that slurmctld has waiting or running (not
    those COMPLETING: their command has exited, slurmd is only cleaning up), by state."""

    async def count() -> dict[str, int]:
        out = await asyncio.to_thread(sim.run, ["squeue", "-h", "-o", "%j %T"], 30.0)
        states = [ln.split()[1] for ln in out.splitlines() if marker in ln.split()[0]]
        live = [st for st in states if st in ("PENDING", "CONFIGURING", "RUNNING")]
        return {"live": len(live), "running": live.count("RUNNING")}

    return count


def gated(gate: Path) -> str:
    """A command that runs until ``gate`` exists (the test ends it by creating the file)."""
    return f"while [ ! -e {gate} ]; do sleep 0.2; done"


async def test_slurm_quota_runs_one_job_at_a_time(
    bed: QuotaBed,
    slurm_clusters: list[SimSlurmCluster],
    tmp_path: Path,
) -> None:
    """jobs=1: the second job waits Pending naming the quota, slurmctld never holds two of the
    namespace's jobs, and the second runs once the first ends by itself."""
    b, sim = bed, slurm_clusters[1]
    cluster = f"qslurm-{b.run_id}"
    config = sim.adapter_config(sim.root / "work" / cluster)
    await b.skyctl(
        "apply",
        "-f",
        "-",
        stdin=yaml.safe_dump(
            {
                "kind": "Cluster",
                "metadata": {"name": cluster},
                "spec": {"manager": "slurm", "config": config},
            }
        ),
    )
    await b.stack.cluster_phase(cluster, "Ready", timeout=120)
    ns = await b.namespace("qs")
    await b.skyctl("create", "quota", "hpc", "-n", ns, "--hard", "jobs=1,cpus=4")
    marker = f"-{b.run_id}-"
    async with Sampler(squeue_live(sim, marker)).running() as sampler:
        await b.job(f"one-{b.run_id}", ns, gated(tmp_path / "one-done"), cpus=2)
        await b.stack.job_phase(f"one-{b.run_id}", "Running", ns=ns, timeout=120)
        await b.job(f"two-{b.run_id}", ns, gated(tmp_path / "two-done"), cpus=2)
        pending = await b.waiting(f"two-{b.run_id}", ns)
        assert pending["status"]["message"] == (
            f"waiting for quota: over Quota {ns}/hpc: jobs 1 of 1 used, needs 1 more"
        )
        await b.quota_shows("hpc", ns, {"cpus": 2.0, "jobs": 1.0})
        _, row = table(await b.skyctl("get", "quotas", "-n", ns))
        assert row[:4] == ["hpc", ns, "-", "cpus: 2/4, jobs: 1/1"], row
        assert await squeue_live(sim, marker)() == {"live": 1, "running": 1}

        (tmp_path / "one-done").touch()  # the first job's command exits 0
        await b.stack.job_phase(f"one-{b.run_id}", "Succeeded", ns=ns, timeout=120)
        running = await b.stack.job_phase(f"two-{b.run_id}", "Running", ns=ns, timeout=120)
        assert running["status"]["placement"] == {cluster: 1}

        async def second_in_slurm() -> bool:
            return await squeue_live(sim, f"two-{b.run_id}-")() == {"live": 1, "running": 1}

        await b.stack.wait("the second job running in slurmctld", second_in_slurm, timeout=60)
        (tmp_path / "two-done").touch()
        await b.stack.job_phase(f"two-{b.run_id}", "Succeeded", ns=ns, timeout=120)
        await b.quota_shows("hpc", ns, {"cpus": 0.0, "jobs": 0.0})
    assert sampler.most["live"] == 1, f"{sampler.most['live']} Slurm jobs of {ns} live at once"


# ---- a cohort of two namespaces on Kubernetes -------------------------------------------------


async def test_k8s_cohort_lends_unused_quota_up_to_the_borrowing_limit(
    bed: QuotaBed,
    k8s_clusters: list[SimK8sCluster],
    k8s_config: Callable[..., Obj],
) -> None:
    """Two namespaces of cpus=2 in cohort ``pool``; ``qa`` may borrow 2 more. With ``qb``
    holding 1 CPU, ``qa`` runs 3 (borrowing 1, shown in status.borrowed and -o wide); a fourth
    waits for the cohort; when ``qb``'s job is deleted it runs; a fifth is over the borrowing
    limit. The apiserver never holds more of the cohort's pods than its 4 CPUs."""
    b, sim = bed, k8s_clusters[1]
    await attach_k8s(b, sim)
    qa, qb = await b.namespace("qa"), await b.namespace("qb")
    await b.skyctl(
        "create",
        "quota",
        "share",
        "-n",
        qa,
        "--hard",
        "cpus=2",
        "--cohort",
        "pool",
        "--borrowing-limit",
        "cpus=2",
    )
    await b.skyctl("create", "quota", "share", "-n", qb, "--hard", "cpus=2", "--cohort", "pool")
    manager = kube(sim, k8s_config)
    try:
        async with Sampler(pods_by_namespace(manager, qa, qb)).running() as sampler:
            await b.job("b1", qb, "sleep 3600")
            await b.stack.job_phase("b1", "Running", ns=qb, timeout=120)
            await b.job("a1", qa, "sleep 3600", replicas=3)
            await b.stack.job_phase("a1", "Running", ns=qa, timeout=120)
            await b.quota_shows("share", qa, {"cpus": 3.0}, borrowed={"cpus": 1.0})
            header, row = table(await b.skyctl("get", "quotas", "-n", qa, "-o", "wide"))
            assert header == [
                "NAME",
                "NAMESPACE",
                "COHORT",
                "USED/HARD",
                "AGE",
                "WEIGHT",
                "BORROWED",
            ]
            assert row[:4] + row[5:] == ["share", qa, "pool", "cpus: 3/2", "1", "cpus: 1"]

            await b.job("a2", qa, "sleep 3600")
            pending = await b.waiting("a2", qa)
            assert pending["status"]["message"] == (
                f"waiting for quota: over Quota {qa}/share: cpus 3 of 2 used, needs 1 more, "
                "and cohort pool has 0 unused"
            )

            await b.skyctl("delete", "job", "b1", "-n", qb)
            await b.stack.job_phase("a2", "Running", ns=qa, timeout=120)
            await b.quota_shows("share", qa, {"cpus": 4.0}, borrowed={"cpus": 2.0})
            await b.quota_shows("share", qb, {"cpus": 0.0})

            await b.job("a3", qa, "sleep 3600")
            over = await b.waiting("a3", qa)
            assert over["status"]["message"] == (
                f"waiting for quota: over Quota {qa}/share: cpus 4 used of 2 plus at most 2 "
                "borrowed, needs 1 more"
            )
        assert sampler.most_total <= 4, f"{sampler.most} pods of the cohort live at once"
        assert sampler.most[qa] == 4 and sampler.most[qb] == 1, sampler.most
    finally:
        await asyncio.to_thread(manager.api.close)
