"""A cluster unreachable for ``SKYSHIFT_FAULT_SECONDS`` (60 s unless told): failover and return.

Three local clusters: ``fa`` (4 cpus, preferred by every job), ``fb`` (2 cpus) and ``fc``
(3 cpus). Eight jobs (every third with two replicas: 11 replicas of 0.25 cpu) all start on
``fa``: six short ones (0.3 x the outage, at least 3 s), which finish elsewhere while ``fa`` is
away, and two long ones, which run until the test lets them end once ``fa`` is back and clean.
Then ``<state_dir>/OFFLINE`` makes ``fa`` unreachable (every adapter call fails; its replicas
keep running, as on a real cluster cut off from the network) for the whole outage, and is
removed.

Expected, in order: ``fa`` goes to phase Error; every replica it ran is placed and running on
``fb``/``fc``; ``fa`` is Ready again after the outage; its leftovers (the copies of moved
replicas, finished or not) are removed from it; every job succeeds. At the end no replica exists
twice across the three clusters, each replica ran at most twice (once on ``fa``, once where it
moved) and etcd's placement and replica counts agree with what the clusters hold.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.faults.lifecycle_helpers import (
    FaultStack,
    Progress,
    census,
    fault_seconds,
    secs,
    verify,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PREFER = {"skyshift-faults-prefer": "yes"}


async def test_cluster_unreachable_fails_over_and_is_cleaned(tmp_path: Path) -> None:
    outage = fault_seconds(60.0)
    short = max(3.0, 0.3 * outage)
    async with FaultStack(tmp_path) as fs:
        await fs.add_cluster("fa", 4, labels=PREFER)
        await fs.add_cluster("fb", 2)
        await fs.add_cluster("fc", 3)
        for name in ("fa", "fb", "fc"):
            await fs.cluster_phase(name, "Ready")
        progress = Progress(fs).start()
        manifests = [
            fs.job_manifest(f"mover-{i}", 1 if i >= 6 else short, cpus=0.25,
                            replicas=2 if i % 3 == 0 else 1, prefer=PREFER,
                            gate="end-long" if i >= 6 else None)
            for i in range(8)
        ]
        await fs.submit_all(manifests)
        replicas = sum(m["spec"]["replicas"] for m in manifests)
        await fs.wait_started("mover-", replicas)
        on_fa = fs.running("fa")
        assert len(on_fa) == replicas, f"{replicas - len(on_fa)} replicas did not start on fa"

        offline = fs.state_dirs["fa"] / "OFFLINE"
        offline.touch()
        t_off = time.monotonic()
        t_error = await fs.cluster_phase("fa", "Error", timeout=60)
        error_msg = ((await fs.cluster("fa")) or {}).get("status", {}).get("message", "")

        moved_at: float | None = None
        where: dict[str, str] = {}
        deadline = t_off + outage
        while time.monotonic() < deadline:
            fb, fc = fs.running("fb"), fs.running("fc")
            if on_fa <= fb | fc:
                moved_at = time.monotonic()
                where = {**dict.fromkeys(fb, "fb"), **dict.fromkeys(fc, "fc")}
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        offline.unlink()
        t_back = time.monotonic()
        t_ready = await fs.cluster_phase("fa", "Ready", timeout=60)

        moved_uids = {str(fs.jobs[m["metadata"]["name"]]["metadata"]["uid"]) for m in manifests}
        cleaned_at: float | None = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = [r for r in (await census(fs)).reported["fa"] if r.job_uid in moved_uids]
            if not left:
                cleaned_at = time.monotonic()
                break
            await asyncio.sleep(0.5)

        fs.release("end-long")
        expected = {m["metadata"]["name"]: "Succeeded" for m in manifests}
        jobs = await fs.wait_jobs(expected, timeout=90)
        await progress.stop()
        verdict, c = await verify(fs, jobs, expected, max_runs=dict.fromkeys(on_fa, 2))
        if moved_at is None:
            verdict.problems.append(
                f"replicas not running elsewhere by the end of the outage: "
                f"{sorted(on_fa - set(where))}")
        if cleaned_at is None:
            left = sorted(f"{r.name} {r.state}" for r in c.reported["fa"]
                          if r.job_uid in moved_uids)
            verdict.problems.append(f"leftovers of moved replicas still on fa 60 s after it was "
                                    f"Ready: {left}")
        moved_to = {cl: sum(1 for v in where.values() if v == cl) for cl in ("fb", "fc")}

        print(f"\n[cluster-offline] {len(manifests)} jobs ({replicas} replicas) running on fa; fa "
              f"unreachable {t_back - t_off:.1f}s (SKYSHIFT_FAULT_SECONDS={outage:g}); 6 jobs of "
              f"{short:g}s, 2 running until fa was back and clean")
        print(f"[cluster-offline] fa Error {t_error - t_off:.2f}s after OFFLINE ({error_msg!r}); "
              f"all {len(on_fa)} replicas running elsewhere {secs(moved_at and moved_at - t_off)} "
              f"after OFFLINE ({moved_to})")
        print(f"[cluster-offline] fa Ready {t_ready - t_back:.2f}s after it came back; leftovers "
              f"removed {secs(cleaned_at and cleaned_at - t_ready)} after Ready; all jobs "
              f"terminal {secs(progress.all_terminal_after(t_off, expected))} after OFFLINE")
        print(f"[cluster-offline] {verdict.summary()}; ledger runs "
              f"{sum(map(len, c.runs.values()))}")
        assert not verdict.problems, "\n".join(verdict.problems[:20])
