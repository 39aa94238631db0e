"""Determinism: histories recorded on the real dev server replay against the current code.

Runs a few lifecycles (success, restarts until Failed, failover, deletion, the scheduler and a
cluster), fetches their histories from the server and replays them with ``Replayer``. With
``SKYSHIFT_RECORD_HISTORIES=1`` the histories are also written to tests/workflows/histories/, the
committed corpus that ``tests/workflows/test_replay.py`` replays without any server, so a code
change that breaks determinism for already-running workflows fails even without Temporal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from skyshift.workers.control import WORKFLOWS
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]
HISTORIES = Path(__file__).parent.parent / "workflows" / "histories"


async def test_recorded_histories_replay(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("rp-a", cpus=4)
    await s.cluster_phase("rp-a", "Ready")
    await s.submit("rp-ok", "sleep 0.3", replicas=2)
    await s.submit("rp-fail", "exit 2", restartPolicy="OnFailure", maxRestarts=1)
    await s.submit("rp-del", "sleep 600", restartPolicy="Always")
    await s.job_phase("rp-ok", "Succeeded")
    await s.job_phase("rp-fail", "Failed")
    await s.job_phase("rp-del", "Running")
    await s.add_cluster("rp-b", cpus=4)
    await s.cluster_phase("rp-b", "Ready")
    (s.state_dirs["rp-a"] / "OFFLINE").touch()

    async def moved() -> bool:
        job = await s.get("jobs", "rp-del")
        return bool(job and job["status"].get("placement") == {"rp-b": 1})

    try:
        await s.wait("failover", moved, timeout=30)
    except AssertionError:
        raise AssertionError(str(await s.get("jobs", "rp-del"))) from None
    (s.state_dirs["rp-a"] / "OFFLINE").unlink()
    await s.cluster_phase("rp-a", "Ready", timeout=20)
    await s.delete("jobs", "rp-del", "default")

    async def gone() -> bool:
        return await s.get("jobs", "rp-del") is None

    await s.wait("deleted", gone, timeout=30)
    ids = {
        "job_succeeded": "job/default/rp-ok", "job_failed": "job/default/rp-fail",
        "job_failover_deleted": "job/default/rp-del", "scheduler": "scheduler",
        "cluster_lost_returned": "cluster/rp-a",
    }
    histories: list[WorkflowHistory] = []
    for label, wf_id in ids.items():
        history = await s.client.get_workflow_handle(wf_id).fetch_history()
        histories.append(history)
        if os.environ.get("SKYSHIFT_RECORD_HISTORIES") == "1":
            HISTORIES.mkdir(parents=True, exist_ok=True)
            (HISTORIES / f"{label}.json").write_text(history.to_json())
    replayer = Replayer(workflows=WORKFLOWS)
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (history.workflow_id, result.replay_failure)
