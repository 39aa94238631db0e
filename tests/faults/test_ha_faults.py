"""Faults on the production topology (``skyshift up --ha``) lose and duplicate no replica.

`up --ha` in a temporary home (three etcd members, the Temporal server built by
scripts/build-temporal.sh, HAProxy before two API replicas, two control workers, two skylet
managers), one local cluster, and two scenarios of bench/ha_faults.py on a burst of 20 jobs
submitted through HAProxy: one control worker SIGKILLed once a third of the jobs are created, and
the Temporal server stopped and started again by ``skyshift up --ha``. After each, every job must
reach Succeeded and the ledger the replicas write must show each replica ran exactly once, and
no request through HAProxy may fail apart from those in flight when the fault struck.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ha_faults import SCENARIOS, HaFaultStack, scenario

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

JOBS = 20


async def test_control_kill_and_temporal_restart_lose_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    fs = HaFaultStack(tmp_path)
    async with fs:
        await fs.add_cluster("fa", cpus=4)
        await fs.cluster_phase("fa", "Ready", timeout=300)
        for name in ("control", "temporal"):
            got = await scenario(fs, name, SCENARIOS[name], JOBS)
            assert (got["succeeded"], got["lost"], got["duplicated"]) == (JOBS, 0, 0), got
            # through HAProxy, only the requests in flight at the fault may fail: a Temporal
            # restart must not empty the pool (its check leaves Temporal out)
            assert got["failed"] == got["failed_in_flight"], got
