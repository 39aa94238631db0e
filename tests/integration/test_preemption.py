"""Preemption on the real Temporal dev server, etcd and a local cluster: a high-priority job
evicts the fewest lower-priority jobs (a gang whole), they go back to Pending saying why, and are
placed again once it ends; the cluster never holds more replicas than it has room for."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

import pytest
from prometheus_client import REGISTRY

from skyshift.cli.describe import describe_text
from skyshift.compat.local.adapter import LocalManager
from skyshift.failpoints import ENV, PREEMPT_SIGNALLED
from skyshift.models import kind_info
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

LIVE = ("Pending", "Running")


class ReplicaWatch:
    """Counts the cluster's live replicas at every poll (the most ever seen, and by name), and
    keeps every set of live replicas it saw, in order."""

    def __init__(self, s: LifecycleStack, cluster: str) -> None:
        self.mgr = LocalManager(cluster, {"state_dir": str(s.state_dirs[cluster]), "cpus": 1})
        self.most = 0
        self.doubled: list[str] = []
        self.seen: list[list[str]] = []
        self.task = asyncio.create_task(self._poll())

    async def live(self) -> list[str]:
        return [r.name for r in await self.mgr.replicas() if r.state in LIVE]

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                names = await self.live()
                self.most = max(self.most, len(names))
                if len(set(names)) != len(names):
                    self.doubled.append(",".join(names))
                if not self.seen or self.seen[-1] != sorted(names):
                    self.seen.append(sorted(names))
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        self.task.cancel()

    def back_before(self, job: str, first: str) -> bool:
        """Whether a replica of ``job`` was gone and live again before ``first``'s ran."""
        was, gone = False, False
        for names in self.seen:
            if any(n.startswith(f"{first}-") for n in names):
                return False
            live = any(n.startswith(f"{job}-") for n in names)
            if live and gone:
                return True
            gone, was = gone or (was and not live), live
        return False


def preempted_condition(job: dict[str, Any]) -> str:
    for c in job["status"].get("conditions") or []:
        if c.get("type") == "Preempted":
            return str(c.get("message"))
    return ""


async def evicted(s: LifecycleStack, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await s.get("jobs", name)
        return obj if obj and preempted_condition(obj) else None

    found: dict[str, Any] = await s.wait(f"{name} preempted", check, timeout=60)
    return found


async def fill(s: LifecycleStack) -> None:
    """steady (1 cpu) then gang (2 x 1 cpu) run on pe-c's 3 cpus."""
    await s.add_cluster("pe-c", cpus=3)
    await s.cluster_phase("pe-c", "Ready")
    await s.submit("steady", "sleep 60", cpus=1, restartPolicy="Never")
    await s.job_phase("steady", "Running")
    await s.submit("gang", "sleep 60", cpus=1, replicas=2, restartPolicy="Never")
    await s.job_phase("gang", "Running")


async def check_outcome(s: LifecycleStack, watch: ReplicaWatch) -> None:
    """urgent (2 cpus) ran by evicting only the gang, which runs again once urgent ended."""
    await s.job_phase("urgent", "Running", timeout=90)
    gang = await evicted(s, "gang")
    assert preempted_condition(gang).startswith("Preempted by default/urgent: ")
    steady = await s.get("jobs", "steady")
    assert steady and steady["status"]["phase"] == "Running"  # the fewest victims
    assert not preempted_condition(steady)
    await s.job_phase("urgent", "Succeeded", timeout=60)
    back = await s.job_phase("gang", "Running", timeout=90)
    assert back["status"]["placement"] == {"pe-c": 2}
    live = await watch.live()
    assert len(live) == 3 and len([n for n in live if n.startswith("gang-")]) == 2
    assert watch.most <= 3 and not watch.doubled  # never over capacity, nothing twice


async def test_a_high_priority_job_evicts_a_gang_whole_and_it_comes_back(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await fill(s)
    watch = ReplicaWatch(s, "pe-c")
    before = evictions()
    try:
        await s.submit("urgent", "sleep 4", cpus=2, priority=10, restartPolicy="Never")
        await s.job_phase("urgent", "Running", timeout=90)
        gang = await s.get("jobs", "gang")
        assert gang and gang["status"]["phase"] in ("Pending", "Scheduled")
        assert len(await watch.live()) == 2  # steady's replica and urgent's (2 cpus)
        await check_outcome(s, watch)
        assert evictions() == before + 1  # the control worker's metric (in-process here)
    finally:
        watch.stop()


async def test_control_worker_killed_mid_preemption_loses_and_doubles_nothing(
    lifecycle_stack: LifecycleStack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = lifecycle_stack
    fp = s.tmp / "failpoints"
    fp.mkdir()
    (fp / f"{PREEMPT_SIGNALLED}.pause").write_text("30")
    monkeypatch.setenv(ENV, str(fp))
    s.start_in_process(control=False)
    control = await s.start_process("control")
    await fill(s)
    watch = ReplicaWatch(s, "pe-c")
    try:
        (fp / f"{PREEMPT_SIGNALLED}.armed").touch()
        await s.submit("urgent", "sleep 4", cpus=2, priority=10, restartPolicy="Never")
        # the round told the gang to go and has not returned: the worker dies right there
        await s.wait("victims signalled", lambda: _exists(fp / f"{PREEMPT_SIGNALLED}.hit"))
        os.killpg(control.pid, signal.SIGKILL)
        control.wait()
        await asyncio.sleep(1)
        await s.start_process("control")
        await check_outcome(s, watch)
    finally:
        watch.stop()


def evictions() -> float:
    value = REGISTRY.get_sample_value("skyshift_preemptions_total", {"namespace": "default"})
    return value or 0.0


async def _exists(path: Any) -> bool:
    return bool(path.exists())


async def test_two_low_jobs_are_evicted_for_one_and_both_come_back(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("pe-two", cpus=2)
    await s.cluster_phase("pe-two", "Ready")
    watch = ReplicaWatch(s, "pe-two")
    try:
        for name in ("low-1", "low-2"):
            await s.submit(name, "sleep 60", cpus=1, priority=-5, restartPolicy="Never")
            await s.job_phase(name, "Running")
        await s.submit(
            "polite", "sleep 2", cpus=2, priority=5, preemptionPolicy="Never", restartPolicy="Never"
        )
        await s.submit("big", "sleep 4", cpus=2, priority=10, restartPolicy="Never")
        big = await s.job_phase("big", "Running", timeout=90)
        assert not big["status"].get("preempting")  # cleared once placed
        for name in ("low-1", "low-2"):
            low = await evicted(s, name)
            shown = describe_text(kind_info("Job"), low)
            assert "Preempted by default/big: it has priority 10" in shown
        await s.job_phase("big", "Succeeded", timeout=60)
        for name in ("low-1", "low-2"):  # what its victims freed one by one was held for big
            assert not watch.back_before(name, "big"), f"{name} ran again first: {watch.seen}"
        await s.job_phase("polite", "Succeeded", timeout=60)  # it waited, evicting nobody
        for name in ("low-1", "low-2"):
            await s.job_phase(name, "Running", timeout=90)
        assert watch.most <= 2 and not watch.doubled
        assert len(await watch.live()) == 2
    finally:
        watch.stop()


async def test_a_job_left_pending_behind_a_short_one_runs_when_it_ends(
    lifecycle_stack: LifecycleStack,
) -> None:
    """A round places "quick" and leaves "waiter" pending behind it; quick ends before its
    cluster ever shows it busy, so no capacity is reported freed: the confirmation of quick's
    reservation is what retries waiter (it waited forever before)."""
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("pe-short", cpus=2)
    await s.cluster_phase("pe-short", "Ready")
    await s.submit("holder", "sleep 3", cpus=2, restartPolicy="Never")
    await s.job_phase("holder", "Running")
    await s.submit(
        "quick", "true", cpus=2, priority=5, preemptionPolicy="Never", restartPolicy="Never"
    )
    await s.submit("waiter", "true", cpus=2, restartPolicy="Never")
    await s.job_phase("quick", "Succeeded", timeout=60)
    await s.job_phase("waiter", "Succeeded", timeout=60)


async def test_a_lender_takes_back_lent_quota_from_a_higher_priority_borrower(
    lifecycle_stack: LifecycleStack,
) -> None:
    """Namespaces rl and rb share cohort "reclaim", 2 cpus each; rb's two priority-9 jobs run on
    4 (2 borrowed). rl's priority-0 job, within rl's own 2, evicts one of them whatever its
    priority, runs, and the evicted job runs again once it ended; never over the cluster's 4."""
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("pe-lend", cpus=4)
    await s.cluster_phase("pe-lend", "Ready")
    for ns in ("rl", "rb"):
        await s.store.create("quotas", {
            "apiVersion": "skyshift.io/v1", "kind": "Quota",
            "metadata": {"name": "share", "namespace": ns, "uid": f"uid-share-{ns}",
                         "generation": 1},
            "spec": {"hard": {"cpus": 2}, "cohort": "reclaim"}, "status": {},
        })
    watch = ReplicaWatch(s, "pe-lend")
    try:
        for name in ("b1", "b2"):
            await s.submit(name, "sleep 600", ns="rb", cpus=2, priority=9, restartPolicy="Never")
            await s.job_phase(name, "Running", ns="rb")
        await s.submit("mine", "sleep 4", ns="rl", cpus=2, restartPolicy="Never")
        await s.job_phase("mine", "Running", ns="rl", timeout=90)

        async def one_evicted() -> list[dict[str, Any]] | None:
            jobs = [await s.get("jobs", name, "rb") for name in ("b1", "b2")]
            found = [j for j in jobs if j]
            return found if any(preempted_condition(j) for j in found) else None

        both = await s.wait("one of rb's jobs evicted", one_evicted, timeout=60)
        gone = [j for j in both if preempted_condition(j)]
        kept = [j for j in both if not preempted_condition(j)]
        assert len(gone) == 1 and len(kept) == 1  # the fewest: 2 cpus are enough
        assert preempted_condition(gone[0]) == (
            "Preempted by rl/mine: its namespace takes back the cohort quota this job's "
            "namespace borrowed")
        assert kept[0]["status"]["phase"] == "Running"
        victim = gone[0]["metadata"]["name"]
        await s.job_phase("mine", "Succeeded", ns="rl", timeout=60)
        await s.job_phase(victim, "Running", ns="rb", timeout=90)
        assert watch.most <= 2 and not watch.doubled  # 2-cpu replicas on 4 cpus
    finally:
        watch.stop()
