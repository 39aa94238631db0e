"""Slurm end to end: Jobs through the whole stack onto real slurmctld/slurmd.

A private ``skyshift up`` (Temporal dev server, etcd, API with auth on, control worker, skylet
manager and its ``local`` cluster) on free ports, the session's simulated Slurm clusters
(``slurm_clusters``: real Slurm 22.05 daemons), and everything done the way a user does it: Cluster
and Job objects created through the API with the admin token, logs fetched through the API (what
``skyctl logs`` calls), and what Slurm itself says read with ``squeue --json``.

The stack is this module's own (not the session's ``devstack``) because the tests stop a Slurm
controller, attach a cluster with broken credentials and spread jobs onto ``local``; nothing of
that should leak into other tests. Clusters get labels (``e2e=<name>``) and every job filters on
them, so each test knows where its replicas may go. Every wait is a poll with a deadline; nothing
asserts how long something took.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.contract.jobs import replica_name
from skyshift.contract.names import cluster_workflow_id
from skyshift.devstack.sim.slurm import SimSlurmCluster
from skyshift.lifecycle.client import connect
from tests.fixtures.auth import admin_token
from tests.fixtures.stack import DevStack, stack_up

if TYPE_CHECKING:
    from tests.fixtures.slurm import SshServer

pytestmark = pytest.mark.integration

LIVE_SLURM = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
              "RESIZING", "SIGNALING", "STAGE_OUT")
Obj = dict[str, Any]


# ---- the stack ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def e2e_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """``skyshift up`` in a private home on free ports (``skyshift down`` afterwards)."""
    with stack_up(tmp_path_factory.mktemp("e2e-slurm-home")) as stack:
        yield stack


@dataclass
class E2E:
    """The stack as a user sees it, plus direct looks at Slurm and Temporal for the checks."""

    stack: DevStack
    api: AsyncSkyShiftClient
    temporal: Client
    sims: list[SimSlurmCluster]
    tmp: Path
    jobs: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    last: Obj = field(default_factory=dict)

    # objects --------------------------------------------------------------------------------

    async def add_slurm_cluster(self, name: str, sim: SimSlurmCluster,
                                **config: Any) -> Obj:
        """A Cluster with ``spec.manager: slurm`` and the sim's adapter config (own workdir)."""
        workdir = sim.root / "work" / f"e2e-{self.run_id}-{name}"
        obj = await self.api.create({
            "kind": "Cluster",
            "metadata": {"name": name, "labels": {"e2e": name}},
            "spec": {"manager": "slurm", "config": {**sim.adapter_config(workdir), **config}},
        })
        self.clusters.append(name)
        return obj

    async def submit(self, name: str, run: str, clusters: list[str], cpus: float = 1,
                     **spec: Any) -> Obj:
        """A Job allowed only on ``clusters`` (placement filters on their ``e2e`` label)."""
        placement = dict(spec.pop("placement", {}))
        placement["filters"] = [{"matchLabels": {"e2e": c}} for c in clusters]
        obj = await self.api.create({
            "kind": "Job",
            "metadata": {"name": name, "labels": {"e2e-run": self.run_id}},
            "spec": {"run": run, "resources": {"cpus": cpus}, "placement": placement, **spec},
        })
        self.jobs.append(name)
        return obj

    def job_name(self, base: str) -> str:
        return f"{base}-{self.run_id}"

    async def get(self, kind: str, name: str) -> Obj | None:
        """The object (None once it is gone); the last one read is kept for failure messages."""
        try:
            obj = await self.api.get(kind, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            obj = None
        self.last = {"object": f"{kind}/{name}", "status": (obj or {}).get("status")}
        return obj

    async def delete(self, kind: str, name: str) -> None:
        try:
            await self.api.delete(kind, name)
        except ApiError as exc:
            if exc.status != 404:
                raise

    # waiting --------------------------------------------------------------------------------

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
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last check: "
                             f"{last}; last object read: {self.last})")

    async def phase(self, kind: str, name: str, phase: str, timeout: float = 90.0) -> Obj:
        seen: list[Obj | None] = [None]

        async def check() -> Obj | None:
            obj = seen[0] = await self.get(kind, name)
            return obj if obj and (obj.get("status") or {}).get("phase") == phase else None

        try:
            found: Obj = await self.wait(f"{kind} {name} {phase}", check, timeout)
            return found
        except AssertionError:
            status = (seen[0] or {}).get("status")
            raise AssertionError(f"{kind} {name} not {phase} in {timeout:g}s: {status}") from None

    async def gone(self, kind: str, name: str, timeout: float = 90.0) -> None:
        async def check() -> bool:
            return await self.get(kind, name) is None

        await self.wait(f"{kind} {name} removed", check, timeout)

    # Slurm and Temporal ---------------------------------------------------------------------

    @staticmethod
    def squeue(sim: SimSlurmCluster) -> list[Obj]:
        """Every job slurmctld knows (``squeue --json`` ignores filters in 22.05; finished jobs
        stay for MinJobAge)."""
        out = subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True,
                             env={**os.environ, **sim.env}, timeout=60).stdout
        doc = json.loads(out)
        assert not doc.get("errors"), doc["errors"]
        jobs: list[Obj] = doc["jobs"]
        return jobs

    def squeue_of(self, sim: SimSlurmCluster, job: Obj) -> list[Obj]:
        """The Slurm jobs of a SkyShift job's replicas (by their deterministic names)."""
        prefix = replica_name(job["metadata"]["name"], job["metadata"]["uid"], 0)[:-1]
        return [j for j in self.squeue(sim) if str(j.get("name", "")).startswith(prefix)]

    async def finished_in_slurm(self, sim: SimSlurmCluster, job: Obj, n: int) -> list[Obj]:
        """The job's ``n`` Slurm jobs once none is live any more (SkyShift may report a replica
        finished a moment before slurmctld has moved it out of COMPLETING)."""
        async def check() -> list[Obj] | None:
            jobs = self.squeue_of(sim, job)
            done = len(jobs) == n and not any(j["job_state"] in LIVE_SLURM for j in jobs)
            return jobs if done else None

        try:
            found: list[Obj] = await self.wait(f"{n} finished Slurm jobs", check, timeout=30)
            return found
        except AssertionError:
            jobs = [(j["job_id"], j["name"], j["job_state"]) for j in self.squeue_of(sim, job)]
            raise AssertionError(f"expected {n} finished Slurm jobs, squeue has {jobs}") from None

    async def history(self, workflow_id: str) -> list[Any]:
        handle = self.temporal.get_workflow_handle(workflow_id)
        return [e async for e in handle.fetch_history_events()]


def names_of(job: Obj, ranks: range) -> list[str]:
    return [replica_name(job["metadata"]["name"], job["metadata"]["uid"], r) for r in ranks]


def counts(job: Obj, cluster: str) -> dict[str, int]:
    return dict(((job.get("status") or {}).get("replicaStatus") or {}).get(cluster) or {})


@pytest_asyncio.fixture(scope="module")
async def e2e(
    e2e_stack: DevStack, slurm_clusters: list[SimSlurmCluster],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[E2E]:
    """The stack, logged in as admin, with ``e2e-slurm1`` attached to slurm1 and Ready and the
    stack's own ``local`` cluster labelled ``e2e=local``."""
    token = admin_token(e2e_stack.api_url, e2e_stack.home)
    api = AsyncSkyShiftClient(e2e_stack.api_url, token=token, namespace="default", timeout=60)
    env = E2E(e2e_stack, api, await connect(e2e_stack.temporal_address),
              slurm_clusters, tmp_path_factory.mktemp("e2e-slurm"))
    try:
        await env.phase("clusters", "local", "Ready")
        await api.patch("clusters", "local", None, {"metadata": {"labels": {"e2e": "local"}}})
        await env.add_slurm_cluster("e2e-slurm1", slurm_clusters[0])
        await env.phase("clusters", "e2e-slurm1", "Ready")
        yield env
    finally:
        await _cleanup(env)
        await api.aclose()


async def _cleanup(env: E2E) -> None:
    """Delete what the tests left (jobs first, while their clusters can still act), then cancel
    whatever of ours Slurm still runs, so later tests on the same sim clusters start empty."""
    for name in env.jobs:
        await env.delete("jobs", name)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        left = [n for n in env.jobs if await env.get("jobs", n) is not None]
        if not left:
            break
        await asyncio.sleep(0.5)
    for name in env.clusters:
        await env.delete("clusters", name)
    for sim in env.sims:
        if not sim.controller_running():
            sim.start_controller()
    for sim in env.sims:
        try:
            ids = [str(j["job_id"]) for j in env.squeue(sim)
                   if f"-{env.run_id}-" in str(j.get("name", ""))
                   and j.get("job_state") in LIVE_SLURM]
        except (subprocess.SubprocessError, AssertionError, ValueError):
            continue
        if ids:
            subprocess.run(["scancel", *ids], env={**os.environ, **sim.env}, timeout=30,
                           check=False, capture_output=True)


# ---- 1. a job runs to Succeeded on Slurm ------------------------------------------------------


async def test_job_succeeds_on_slurm_with_logs(e2e: E2E) -> None:
    name = e2e.job_name("hello")
    # the job runs until the test has seen it Running (a fixed sleep could end between two
    # syncs, and the phase would go straight from Pending to Succeeded); bounded by 120 s
    release = Path(tempfile.gettempdir()) / f"skyshift-e2e-{name}.release"
    job = await e2e.submit(name, "echo hello from slurm rank $SKYSHIFT_RANK of $SKYSHIFT_JOB; "
                           f"for i in $(seq 600); do [ -e {release} ] && break; sleep 0.2; done",
                           ["e2e-slurm1"], restartPolicy="Never")
    try:
        running = await e2e.phase("jobs", name, "Running")
    finally:
        release.touch()
    assert running["status"]["placement"] == {"e2e-slurm1": 1}
    done = await e2e.phase("jobs", name, "Succeeded")
    release.unlink(missing_ok=True)
    assert counts(done, "e2e-slurm1")["Succeeded"] == 1
    assert done["status"]["restarts"] == 0
    [replica] = names_of(job, range(1))
    # what Slurm says: one batch job of that name, completed with exit code 0
    [slurm_job] = await e2e.finished_in_slurm(e2e.sims[0], job, 1)
    assert slurm_job["name"] == replica
    assert slurm_job["job_state"] == "COMPLETED"
    assert "skyshift:v1" in slurm_job.get("comment", "")
    # logs the way `skyctl logs` gets them: through the API and the lifecycle plane
    logs = await e2e.api.logs(name)
    assert f"==> {replica} <==" in logs
    assert f"hello from slurm rank 0 of {name}" in logs


async def test_partition_label_reaches_the_cluster_and_placement(e2e: E2E) -> None:
    """The adapter's ``slurm/partition`` label is on the Cluster (status.labels) and a job's
    placement filter on it selects the cluster; a filter on a partition it lacks does not."""
    async def labelled() -> Obj | None:
        obj = await e2e.get("clusters", "e2e-slurm1")
        return obj if obj and (obj["status"].get("labels") or {}).get("slurm/partition") else None

    cluster = await e2e.wait("slurm/partition on e2e-slurm1", labelled)
    assert cluster["status"]["labels"]["slurm/partition"] == "debug"
    assert "slurm/partition" not in cluster["metadata"]["labels"]  # the user's stay untouched
    name, other = e2e.job_name("part"), e2e.job_name("nopart")
    for job, partition in ((name, "debug"), (other, "gpu")):
        await e2e.api.create({
            "kind": "Job", "metadata": {"name": job, "labels": {"e2e-run": e2e.run_id}},
            "spec": {"run": "true", "resources": {"cpus": 1}, "restartPolicy": "Never",
                     "placement": {"filters": [{"matchLabels": {
                         "slurm/partition": partition, "e2e": "e2e-slurm1"}}]}},
        })
        e2e.jobs.append(job)
    done = await e2e.phase("jobs", name, "Succeeded")
    assert done["status"]["placement"] == {"e2e-slurm1": 1}

    async def explained() -> Obj | None:
        obj = await e2e.get("jobs", other)
        reasons = (obj or {}).get("status", {}).get("schedulerReasons") or {}
        return obj if "e2e-slurm1" in reasons else None

    pending = await e2e.wait(f"{other} explained", explained)
    assert pending["status"]["phase"] == "Pending"
    assert "slurm/partition" in pending["status"]["schedulerReasons"]["e2e-slurm1"]


# ---- 2. restartPolicy on a failing command ----------------------------------------------------


async def test_failing_command_restarted_then_failed(e2e: E2E) -> None:
    name = e2e.job_name("crash")
    runs = e2e.tmp / f"{name}.runs"
    job = await e2e.submit(name, f"echo attempt >> {runs}; echo crashing; exit 3",
                           ["e2e-slurm1"], restartPolicy="OnFailure", maxRestarts=2)
    failed = await e2e.phase("jobs", name, "Failed", timeout=120)
    status = failed["status"]
    assert status["restarts"] == 2
    assert "exit code 3" in status["message"]
    assert "maxRestarts (2)" in status["message"]
    assert counts(failed, "e2e-slurm1")["Failed"] == 1
    # three runs in all, each its own Slurm batch job, all exited 3
    assert runs.read_text().splitlines() == ["attempt"] * 3
    slurm_jobs = await e2e.finished_in_slurm(e2e.sims[0], job, 3)
    assert {j["job_state"] for j in slurm_jobs} == {"FAILED"}
    assert {j["name"] for j in slurm_jobs} == set(names_of(job, range(1)))
    # the last attempt's output is what logs show
    assert "crashing" in await e2e.api.logs(name)


# ---- 3. deleting a running job ----------------------------------------------------------------


async def test_delete_running_job_cancels_it_on_slurm(e2e: E2E) -> None:
    name = e2e.job_name("forever")
    job = await e2e.submit(name, "sleep 600", ["e2e-slurm1"], replicas=2,
                           restartPolicy="Always")
    running = await e2e.phase("jobs", name, "Running")
    assert counts(running, "e2e-slurm1")["Running"] == 2

    async def both_running() -> list[Obj] | None:
        jobs = e2e.squeue_of(e2e.sims[0], job)
        return jobs if [j["job_state"] for j in jobs] == ["RUNNING"] * 2 else None

    await e2e.wait("two RUNNING Slurm jobs", both_running)
    await e2e.api.delete("jobs", name)
    await e2e.gone("jobs", name)

    def cancelled() -> bool:
        return all(j["job_state"] == "CANCELLED" for j in e2e.squeue_of(e2e.sims[0], job))

    async def check() -> bool:
        return cancelled()

    await e2e.wait("Slurm jobs cancelled", check, timeout=30)


# ---- 4. one job across local and Slurm --------------------------------------------------------


def fits(cluster: Obj, cpus: float) -> int:
    return sum(int(n["cpus"] // cpus) for n in cluster["status"]["allocatable"].values())


async def test_replicas_spill_from_slurm_to_local_and_run_once(e2e: E2E) -> None:
    local, slurm = await e2e.get("clusters", "local"), await e2e.get("clusters", "e2e-slurm1")
    assert local and slurm
    cpus = 2.0
    on_slurm, on_local = fits(slurm, cpus), fits(local, cpus)
    assert on_slurm >= 1 and on_local >= 1, (slurm["status"], local["status"])
    replicas = on_slurm + 1  # one more than Slurm holds, and never more than local holds
    assert replicas > on_local
    name = e2e.job_name("wide")
    # local replicas run as the unprivileged skyshift-run: the file they append to must be
    # writable by it (pytest's tmp dirs are root's, 0700)
    shared = Path(tempfile.mkdtemp(prefix="e2e-runs-"))
    shared.chmod(0o1777)
    runs = shared / f"{name}.runs"
    release = shared / "release"  # every replica runs until the test has seen the job Running
    job = await e2e.submit(name, f"echo $SKYSHIFT_RANK >> {runs}; echo rank $SKYSHIFT_RANK; "
                           f"for i in $(seq 600); do [ -e {release} ] && break; sleep 0.2; done",
                           ["e2e-slurm1", "local"], cpus=cpus, replicas=replicas,
                           restartPolicy="Never")
    try:
        running = await e2e.phase("jobs", name, "Running")
    finally:
        release.touch()
    placement = running["status"]["placement"]
    assert set(placement) == {"e2e-slurm1", "local"}, placement
    assert sum(placement.values()) == replicas
    done = await e2e.phase("jobs", name, "Succeeded")
    assert done["status"]["placement"] == placement
    assert {c: counts(done, c)["Succeeded"] for c in placement} == placement
    # every rank ran exactly once, wherever it was
    assert sorted(int(r) for r in runs.read_text().split()) == list(range(replicas))
    slurm_jobs = await e2e.finished_in_slurm(e2e.sims[0], job, placement["e2e-slurm1"])
    assert len({j["name"] for j in slurm_jobs}) == len(slurm_jobs)
    assert {j["job_state"] for j in slurm_jobs} == {"COMPLETED"}
    logs = await e2e.api.logs(name)
    for rank, replica in enumerate(names_of(job, range(replicas))):
        assert f"==> {replica} <==\nrank {rank}\n" in logs


# ---- 4b. beyond free capacity: Slurm's own queue, bounded --------------------------------------


async def test_jobs_beyond_free_capacity_wait_in_slurms_queue_up_to_its_bound(e2e: E2E) -> None:
    """With every CPU of e2e-slurm1 taken, new jobs are still handed to Slurm (so it starts
    them the moment a CPU frees) while its queue has room (queue_depth 1: one capacity's worth,
    here two whole-node jobs); they say where they wait. The next one stays queued in SkyShift,
    saying the queue is full. All of them run once the filler goes."""
    sim = e2e.sims[0]
    cpus, nodes = float(sim.node_cpus), len(sim.nodes)
    slurm = await e2e.get("clusters", "e2e-slurm1")
    assert slurm and slurm["status"]["queue"]["limit"]["cpus"] == cpus * nodes
    filler = e2e.job_name("filler")
    await e2e.submit(filler, "sleep 600", ["e2e-slurm1"], cpus=cpus, replicas=nodes,
                     restartPolicy="Never")
    await e2e.phase("jobs", filler, "Running")
    waiters = [e2e.job_name(f"waiter{i}") for i in range(nodes + 1)]
    jobs = []
    for name in waiters[:nodes]:  # one at a time, so each knows how many wait before it
        jobs.append(await e2e.submit(name, "echo waited", ["e2e-slurm1"], cpus=cpus,
                                     restartPolicy="Never"))
        await e2e.phase("jobs", name, "Scheduled")
    for i, (name, job) in enumerate(zip(waiters, jobs, strict=False)):
        obj = await e2e.get("jobs", name)
        assert obj is not None
        status = obj["status"]
        assert status["message"].endswith(f"queued in e2e-slurm1 behind {i} jobs"), status
        assert status["placement"] == {"e2e-slurm1": 1}

        async def pending_in_slurm(job: Obj = job) -> bool:
            return [j["job_state"] for j in e2e.squeue_of(sim, job)] == ["PENDING"]

        await e2e.wait(f"{name} PENDING in Slurm", pending_in_slurm)
    await e2e.submit(waiters[-1], "echo waited", ["e2e-slurm1"], cpus=cpus,
                     restartPolicy="Never")

    async def told_full() -> Obj | None:
        obj = await e2e.get("jobs", waiters[-1])
        reasons = (obj or {}).get("status", {}).get("schedulerReasons") or {}
        return obj if "its queue is full" in reasons.get("e2e-slurm1", "") else None

    last = await e2e.wait(f"{waiters[-1]} pending: the queue is full", told_full)
    assert last["status"]["phase"] == "Pending" and not last["status"].get("placement")

    async def counted() -> Obj | None:
        c = await e2e.get("clusters", "e2e-slurm1")
        q = (c or {}).get("status", {}).get("queue") or {}
        return q if q.get("jobs") == nodes and q["queued"]["cpus"] == cpus * nodes else None

    await e2e.wait("the queued jobs in the cluster's status.queue", counted)
    await e2e.delete("jobs", filler)
    for name in waiters:
        await e2e.phase("jobs", name, "Succeeded", timeout=120)
    logs = await e2e.api.logs(waiters[0])
    assert "waited" in logs


# ---- 5. slurmctld away: Error, failover, recovery, cleanup ----------------------------------


async def test_controller_down_fails_over_to_local_and_cleans_up(e2e: E2E) -> None:
    sim = e2e.sims[1]
    await e2e.add_slurm_cluster("e2e-slurm2", sim)
    await e2e.phase("clusters", "e2e-slurm2", "Ready")
    name = e2e.job_name("mover")
    job = await e2e.submit(
        name, "echo started on $SKYSHIFT_RANK; sleep 600", ["e2e-slurm2", "local"], cpus=0.5,
        replicas=2, restartPolicy="Always",
        placement={"preferences": [{"matchLabels": {"e2e": "e2e-slurm2"}, "weight": 10}]},
    )
    running = await e2e.phase("jobs", name, "Running")
    assert running["status"]["placement"] == {"e2e-slurm2": 2}

    async def live_on_slurm() -> list[Obj]:
        return [j for j in e2e.squeue_of(sim, job) if j["job_state"] == "RUNNING"]

    await e2e.wait("both replicas RUNNING in Slurm", lambda: _len_is(live_on_slurm, 2))
    sim.stop_controller()
    try:
        error = await e2e.phase("clusters", "e2e-slurm2", "Error", timeout=90)
        message = error["status"]["message"]
        assert "unreachable" in message and "e2e-slurm2" in message, message

        async def on_local() -> Obj | None:
            obj = await e2e.get("jobs", name)
            ok = obj and obj["status"]["placement"] == {"local": 2} and counts(
                obj, "local").get("Running") == 2
            return obj if ok else None

        moved = await e2e.wait("replicas running on local", on_local, timeout=90)
        assert moved["status"]["phase"] == "Running"
    finally:
        sim.start_controller()
    await e2e.phase("clusters", "e2e-slurm2", "Ready", timeout=120)

    async def slurm_clean() -> list[Obj] | None:
        jobs = e2e.squeue_of(sim, job)
        return jobs if not any(j["job_state"] in LIVE_SLURM for j in jobs) else None

    try:
        leftovers = await e2e.wait("leftovers cancelled in Slurm", slurm_clean, timeout=90)
    except AssertionError:
        live = [(j["job_id"], j["name"], j["job_state"]) for j in e2e.squeue_of(sim, job)]
        raise AssertionError(f"the replicas that moved to local still run on Slurm after "
                             f"e2e-slurm2 came back (each rank runs twice): {live}") from None
    assert {j["job_state"] for j in leftovers} <= {"CANCELLED"}, leftovers
    # the job kept running where it moved, and its status stops counting the Slurm replicas
    after = await e2e.get("jobs", name)
    assert after is not None
    assert after["status"]["phase"] == "Running"
    assert after["status"]["placement"] == {"local": 2}

    seen: list[Any] = [None]

    async def counted_once() -> bool:
        obj = await e2e.get("jobs", name)
        per_cluster = seen[0] = (obj or {}).get("status", {}).get("replicaStatus") or {}
        return not any(per_cluster.get("e2e-slurm2", {}).values()) and counts(
            obj or {}, "local").get("Running") == 2

    try:
        await e2e.wait("replicaStatus without the moved replicas", counted_once, timeout=30)
    except AssertionError:
        raise AssertionError(f"replicaStatus still counts the replicas that moved away from "
                             f"e2e-slurm2 (now on local): {seen[0]}") from None
    # the adapter forgot the moved replicas too (their records were removed). Waited for:
    # replicaStatus no longer counts them as soon as local reports (counts are capped at
    # spec.replicas, stale clusters first), which can be before e2e-slurm2's sweep is done
    workdir = sim.root / "work" / f"e2e-{e2e.run_id}-e2e-slurm2"

    async def forgotten() -> bool:
        return not [p.name for p in workdir.glob(f"{name}-*.job")]

    await e2e.wait("the moved replicas' records removed", forgotten, timeout=30)
    await e2e.delete("jobs", name)
    await e2e.gone("jobs", name)
    await e2e.delete("clusters", "e2e-slurm2")
    await e2e.gone("clusters", "e2e-slurm2")


async def _len_is(fn: Callable[[], Awaitable[list[Obj]]], n: int) -> bool:
    return len(await fn()) == n


# ---- 6. bad SSH credentials -------------------------------------------------------------------


def ssh_attempts(server: SshServer) -> int:
    """Connections sshd saw from a client it did not let in (its log, -e at INFO)."""
    try:
        text = (server.key.parent / "sshd.log").read_text(errors="replace")
    except OSError:
        return 0
    return sum(1 for line in text.splitlines()
               if "Connection closed by authenticating user" in line
               or "Failed publickey" in line)


async def test_bad_ssh_key_is_a_clear_permanent_error(e2e: E2E, slurm_sshd: SshServer) -> None:
    before = ssh_attempts(slurm_sshd)
    name = "e2e-badssh"
    config = slurm_sshd.config(ssh_key_path=str(slurm_sshd.wrong_key))
    config["slurm_conf"] = str(e2e.sims[0].conf)
    await e2e.add_slurm_cluster(name, e2e.sims[0], **config)
    error = await e2e.phase("clusters", name, "Error", timeout=90)
    message = error["status"]["message"]
    assert "ssh" in message and "failed" in message, message
    assert "Permission denied" in message, message
    assert "ssh_key_path" in message, message
    # no retry storm: over a while, neither the workflow's history nor sshd's attempts grow
    await asyncio.sleep(3)
    wf_id = cluster_workflow_id(name)
    events0, attempts0 = len(await e2e.history(wf_id)), ssh_attempts(slurm_sshd)
    await asyncio.sleep(10)
    events1, attempts1 = len(await e2e.history(wf_id)), ssh_attempts(slurm_sshd)
    assert (events1, attempts1) == (events0, attempts0)
    still = await e2e.get("clusters", name)
    assert still and still["status"]["phase"] == "Error"
    history = await e2e.history(wf_id)
    syncs = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
             and e.activity_task_scheduled_event_attributes.activity_type.name == "sync_cluster"]
    retried = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
               and e.activity_task_started_event_attributes.attempt > 1]
    assert not retried, "a permanent error must not be retried by Temporal"
    assert len(syncs) <= 2, f"{len(syncs)} attach attempts"
    assert attempts1 - before <= 4 * len(syncs), (before, attempts1)
    await e2e.delete("clusters", name)
    await e2e.gone("clusters", name)
