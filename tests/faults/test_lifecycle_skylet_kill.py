"""kill -9 of the skylet manager while replicas run, then ``skyshift up``.

Two local clusters of 4 cpus and 12 jobs (every third with two replicas: 16 replicas of 0.5 cpu,
exactly what fits), each running until the test lets it end. With every replica running the
skylet manager (every cluster's worker: submit, delete and the sync loop that reports replica
states) gets SIGKILL. Replicas are detached processes and keep running; half of the jobs are let
end while nobody watches, and four more jobs are submitted meanwhile. After 6 s ``skyshift up``
starts a new skylet manager, whose first look at each cluster must report what ended while it
was away and adopt what still runs (never submit it again); the other half are let end 3 s
later. Every job must succeed, each replica must have run exactly once on one cluster, and etcd
must agree with the clusters.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.faults.lifecycle_helpers import FaultStack, finish, secs, two_clusters, until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OUTAGE = 6.0  # seconds the skylet manager stays dead


async def test_kill_9_skylet_manager_while_replicas_run(tmp_path: Path) -> None:
    async with FaultStack(tmp_path) as fs:
        progress = await two_clusters(fs)
        first = [fs.job_manifest(f"run-{i:02d}", 1, replicas=2 if i % 3 == 0 else 1,
                                 gate="end-short" if i % 2 else "end-long") for i in range(12)]
        await fs.submit_all(first)

        await fs.wait_started("run-", 16)
        live = fs.running()
        pid = await fs.kill9("skylet-manager")
        killed = time.monotonic()
        at_kill = progress.histogram()
        late = [fs.job_manifest(f"late-{i}", 3) for i in range(4)]
        await fs.submit_all(late)
        await asyncio.sleep(2)
        fs.release("end-short")
        await until(killed, OUTAGE)
        still = fs.running()
        ended_unseen = len(live - still)

        restarted, up_s = await fs.restart("skylet-manager")
        await asyncio.sleep(3)
        fs.release("end-long")
        out = await finish(fs, progress, first + late, timeout=300)
        verdict = out.verdict

        print(f"\n[skylet-kill] {len(out.expected)} jobs ({out.replicas} replicas) on 2 clusters; "
              f"skylet manager (pid {pid}) killed with {len(live)} replicas running, phases "
              f"{at_kill}; 4 jobs submitted while it was dead; {ended_unseen} replicas ended "
              f"unseen, {len(live & still)} still ran at the restart")
        print(f"[skylet-kill] dead {restarted - killed:.1f}s until a new one polled (`skyshift "
              f"up` took {up_s:.1f}s); first job Succeeded "
              f"{secs(progress.first_change_after(restarted, ('Succeeded',)))} after the restart, "
              f"all jobs terminal {secs(progress.all_terminal_after(restarted, out.expected))} "
              f"after it")
        print(f"[skylet-kill] {out.summary()}")
        assert not verdict.problems, "\n".join(verdict.problems[:20])
