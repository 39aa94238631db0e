"""The Temporal dev server stopped and restarted on its SQLite file while jobs are in flight.

Two local clusters of 4 cpus. Twelve jobs (every fourth with two replicas: 15 replicas of 0.5
cpu) start together and run until the test lets them end; four more jobs of 1 cpu wait in the
scheduler's queue for that capacity. The Temporal dev server is then stopped the way
``skyshift down`` stops it (SIGTERM to its process group) and stays away 10 s. Two seconds into
the outage the 15 replicas are let end, so the skylets see them end while they cannot reach
Temporal; four more jobs are created through the API meanwhile (the API still answers: etcd
takes the object and the control worker's reconciler starts the missing workflows later). Then
``skyshift up`` starts the server again on the same database and reuses everything else. Every
workflow must pick up where it was: every job succeeds, each replica ran exactly once on one
cluster, and etcd agrees with the clusters.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.faults.lifecycle_helpers import (
    FaultStack,
    finish,
    jobs_in_flight,
    secs,
    two_clusters,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OUTAGE = 10.0  # seconds the Temporal server stays down
ENDS_AFTER = 2.0  # seconds into the outage when the running replicas end


async def test_temporal_restart_with_jobs_in_flight(tmp_path: Path) -> None:
    async with FaultStack(tmp_path) as fs:
        progress = await two_clusters(fs)
        first, queued, live = await jobs_in_flight(fs)

        t_stop = time.monotonic()
        how = await fs.stop("temporal")
        stopped = time.monotonic()
        at_stop = progress.histogram()
        late = [fs.job_manifest(f"during-{i}", 3) for i in range(4)]
        creates = asyncio.create_task(fs.submit_all(late, concurrency=4))
        await asyncio.sleep(ENDS_AFTER)
        fs.release("end-flight")
        await until(stopped, OUTAGE)
        still = fs.running()

        restarted, up_s = await fs.restart("temporal")
        slowest_create = await creates
        out = await finish(fs, progress, first + queued + late, timeout=150)
        verdict = out.verdict
        late_names = {m["metadata"]["name"] for m in late}
        late_moved = [t for t, name, _, new in progress.changes
                      if name in late_names and new != "Pending"]

        print(f"\n[temporal-restart] {len(out.expected)} jobs ({out.replicas} replicas) on 2 "
              f"clusters; Temporal {how} in {stopped - t_stop:.1f}s with {len(live)} replicas "
              f"running, phases {at_stop}; {len(live - still)} replicas ended {ENDS_AFTER:g}s "
              f"into the outage, 4 jobs created meanwhile (slowest answer {slowest_create:.1f}s)")
        first_change = progress.first_change_after(restarted)
        created_moved = max(late_moved) - restarted if late_moved else None
        print(f"[temporal-restart] listening again {restarted - stopped:.1f}s after it stopped "
              f"(`skyshift up` took {up_s:.1f}s); first phase change {secs(first_change)} after "
              f"that; jobs created during the outage left Pending {secs(created_moved)} after it; "
              f"all jobs terminal {secs(progress.all_terminal_after(restarted, out.expected))} "
              f"after it")
        print(f"[temporal-restart] {out.summary()}")
        assert not verdict.problems, "\n".join(verdict.problems[:20])
