"""etcd stopped and restarted while jobs are in flight.

Two local clusters of 4 cpus. Twelve jobs (every fourth with two replicas: 15 replicas of 0.5
cpu) start together and run until the test lets them end; four more jobs of 1 cpu wait in the
scheduler's queue for that capacity. etcd is then stopped the way ``skyshift down`` stops it
(SIGTERM to its process group) and stays away 10 s. Two seconds into the outage the 15 replicas
are let end, while every status write (skylets, job workflows, the scheduler's placements) fails
and is retried. Then ``skyshift up`` starts etcd again on its data directory and reuses
everything else. Every job must succeed, each replica ran exactly once on one cluster, and etcd
must agree with the clusters.
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

OUTAGE = 10.0  # seconds etcd stays down
ENDS_AFTER = 2.0  # seconds into the outage when the running replicas end


async def test_etcd_restart_with_jobs_in_flight(tmp_path: Path) -> None:
    async with FaultStack(tmp_path) as fs:
        progress = await two_clusters(fs)
        first, queued, live = await jobs_in_flight(fs)

        t_stop = time.monotonic()
        how = await fs.stop("etcd")
        stopped = time.monotonic()
        at_stop = progress.histogram()
        await asyncio.sleep(ENDS_AFTER)
        fs.release("end-flight")
        await until(stopped, OUTAGE)
        still = fs.running()

        restarted, up_s = await fs.restart("etcd")
        out = await finish(fs, progress, first + queued, timeout=150)
        verdict = out.verdict

        print(f"\n[etcd-restart] {len(out.expected)} jobs ({out.replicas} replicas) on 2 clusters; "
              f"etcd {how} in {stopped - t_stop:.1f}s with {len(live)} replicas running, phases "
              f"{at_stop}; {len(live - still)} replicas ended {ENDS_AFTER:g}s into the outage; "
              f"job list answered by the API {progress.failed_polls} times not 200")
        print(f"[etcd-restart] healthy again {restarted - stopped:.1f}s after it stopped "
              f"(`skyshift up` took {up_s:.1f}s); first phase change "
              f"{secs(progress.first_change_after(restarted))} after that; all jobs terminal "
              f"{secs(progress.all_terminal_after(restarted, out.expected))} after it")
        print(f"[etcd-restart] {out.summary()}")
        assert not verdict.problems, "\n".join(verdict.problems[:20])
