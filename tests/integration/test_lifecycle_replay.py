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

from skyshift.lifecycle.converter import DATA_CONVERTER
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
    replayer = Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER)
    for history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, (history.workflow_id, result.replay_failure)


async def test_service_history_replays(lifecycle_stack: LifecycleStack) -> None:
    """A service on a local cluster linked with another, both running replicas: applied,
    refreshed, deleted. Recorded as ``service_linked`` (``SKYSHIFT_RECORD_HISTORIES=1``);
    ``service_linked_pre_mesh.json`` is this same test recorded on the code before copies on
    linked clusters (the ``service-on-linked-clusters`` patch), which must replay too."""
    from skyshift.activities import spawn
    from skyshift.contract.names import SIG_REFRESH, service_workflow_id
    from skyshift.contract.services import Refresh
    from tests.fixtures.require import require_binary
    from tests.integration.test_service_lifecycle import add_service, delete_and_wait_gone

    require_binary("haproxy", "apt-get install haproxy")
    s = lifecycle_stack
    s.start_in_process()
    for name, zone in (("rs-a", "home"), ("rs-b", "away")):
        await s.add_cluster(name, cpus=1, labels={"zone": zone})
        await s.cluster_phase(name, "Ready")
    await spawn.create_and_start(s.store, s.client, {
        "kind": "Link", "metadata": {"name": "rs-a-rs-b"},
        "spec": {"source_cluster": "rs-a", "target_cluster": "rs-b"}})
    for job, zone in (("rs-home", "home"), ("rs-away", "away")):
        await s.submit(job, "exec python3 -m http.server $SKYSHIFT_PORT_8080 --bind 127.0.0.1",
                       labels={"app": "rs"}, cpus=1, ports=[8080],
                       placement={"filters": [{"matchLabels": {"zone": zone}}]})
        await s.job_phase(job, "Running")

    async def linked_ready() -> bool:
        obj = await s.get("links", "rs-a-rs-b")
        return ((obj or {}).get("status") or {}).get("phase") == "Ready"

    await s.wait("link Ready", linked_ready)
    await add_service(s, "rs", selector={"app": "rs"}, primaryCluster="rs-a")

    async def fronting() -> bool:
        obj = await s.get("services", "rs", "default")
        st = (obj or {}).get("status") or {}
        return st.get("phase") == "Ready" and "in front of 2 " in st.get("message", "")

    await s.wait("the service in front of both replicas", fronting)
    handle = s.client.get_workflow_handle(service_workflow_id("default", "rs"))
    for _ in range(2):
        await handle.signal(SIG_REFRESH, Refresh())
    await delete_and_wait_gone(s, "rs")
    history = await handle.fetch_history()
    if os.environ.get("SKYSHIFT_RECORD_HISTORIES") == "1":
        label = os.environ.get("SKYSHIFT_SERVICE_HISTORY", "service_linked")
        (HISTORIES / f"{label}.json").write_text(history.to_json())
    result = await Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER).replay_workflow(
        history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
