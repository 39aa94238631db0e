"""kill -9 of the worker processes in the middle of a burst: nothing lost, nothing doubled."""

from __future__ import annotations

import asyncio
import collections
import signal

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


async def test_kill_9_workers_mid_submissions(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await s.start_process("control")
    await s.start_process("skylet_manager")
    await s.add_cluster("kc-a", cpus=8)
    await s.add_cluster("kc-b", cpus=8)
    await s.cluster_phase("kc-a", "Ready")
    await s.cluster_phase("kc-b", "Ready")
    ledger = s.tmp / "runs.txt"
    run = f"echo $SKYSHIFT_REPLICA >> {ledger}; sleep 2"
    names = [f"burst-{i}" for i in range(24)]
    for i, name in enumerate(names):
        await s.submit(name, run, cpus=1, replicas=2 if i % 3 == 0 else 1,
                       restartPolicy="OnFailure")
        if i == 6:
            s.procs["control"].send_signal(signal.SIGKILL)
            s.procs["control"].wait()
        if i == 10:
            await s.start_process("control")
        if i == 14:
            s.procs["skylet_manager"].send_signal(signal.SIGKILL)
            s.procs["skylet_manager"].wait()
        if i == 18:
            await s.start_process("skylet_manager")
        await asyncio.sleep(0.05)
    for name in names:
        job = await s.job_phase(name, "Succeeded", timeout=120)
        assert job["status"].get("restarts", 0) == 0, job["status"]
    # every replica ran exactly once, on exactly one cluster
    runs = collections.Counter(ledger.read_text().split())
    expected = sum(2 if i % 3 == 0 else 1 for i in range(len(names)))
    assert len(runs) == expected and set(runs.values()) == {1}, runs
    dirs = s.replica_dirs("kc-a") + s.replica_dirs("kc-b")
    assert sorted(dirs) == sorted(runs)
    # SIGTERM ends both workers cleanly
    for proc in s.procs.values():
        proc.terminate()
    for proc in s.procs.values():
        assert proc.wait(20) == 0
