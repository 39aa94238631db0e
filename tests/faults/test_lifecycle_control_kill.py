"""kill -9 of the control worker in the middle of a burst of submissions, then ``skyshift up``.

Three local clusters (4, 3 and 2 cpus) and 30 jobs submitted through the API in a burst of about
4.5 s (every fourth with two replicas: 38 replicas of 0.5 cpu, twice what fits at once, so the
scheduler also holds jobs back and places them as capacity frees). As soon as the first jobs
have been placed, the control worker (every workflow, the scheduler's batch placement, the
reconciler) gets SIGKILL; the burst goes on against the API meanwhile. A few seconds later
``skyshift up`` starts a new control worker (and reuses everything else). Every job must
succeed, every replica must have run exactly once on exactly one cluster, and etcd must say what
the clusters run.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.faults.lifecycle_helpers import FaultStack, Progress, secs, verify

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOBS = 30
PACE = 0.15  # seconds between two submissions: the burst lasts about 4.5 s
OUTAGE = 4.0  # seconds the control worker stays dead


async def test_kill_9_control_worker_mid_burst(tmp_path: Path) -> None:
    async with FaultStack(tmp_path) as fs:
        for name, cpus in (("fa", 4), ("fb", 3), ("fc", 2)):
            await fs.add_cluster(name, cpus)
        for name in ("fa", "fb", "fc"):
            await fs.cluster_phase(name, "Ready")
        progress = Progress(fs).start()
        manifests = [fs.job_manifest(f"burst-{i:02d}", 2, replicas=2 if i % 4 == 0 else 1)
                     for i in range(JOBS)]
        burst = asyncio.create_task(fs.submit_all(manifests, concurrency=4, pace=PACE))

        # kill while the scheduler is placing and the first submissions are going out
        await progress.wait("a first job placed", lambda: any(
            p != "Pending" for p in progress.phases.values()), timeout=60)
        pid = await fs.kill9("control")
        killed = time.monotonic()
        at_kill = progress.histogram()
        submitted_at_kill = len(fs.jobs)
        slowest = await burst
        await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - killed)))

        restarted, up_s = await fs.restart("control")
        dead_changes = progress.changes_between(killed, restarted)
        expected = {m["metadata"]["name"]: "Succeeded" for m in manifests}
        jobs = await fs.wait_jobs(expected, timeout=300)
        await progress.stop()
        decided = progress.first_change_after(restarted, ("Scheduled", "Succeeded", "Failed"))
        verdict, census = await verify(fs, jobs, expected)

        print(f"\n[control-kill] {JOBS} jobs ({sum(m['spec']['replicas'] for m in manifests)} "
              f"replicas) on 3 clusters; control worker (pid {pid}) killed with "
              f"{submitted_at_kill}/{JOBS} jobs submitted, phases then {at_kill}; burst's "
              f"slowest create {slowest:.2f}s")
        print(f"[control-kill] dead {restarted - killed:.1f}s until a new one polled (`skyshift "
              f"up` took {up_s:.1f}s; {dead_changes} phase changes seen meanwhile); first phase "
              f"decided by a workflow {secs(decided)} after the restart; all {JOBS} jobs "
              f"terminal {secs(progress.all_terminal_after(restarted, expected))} after it")
        runs = sum(map(len, census.runs.values()))
        print(f"[control-kill] {verdict.summary()}; ledger runs {runs}")
        assert not verdict.problems, "\n".join(verdict.problems[:20])
