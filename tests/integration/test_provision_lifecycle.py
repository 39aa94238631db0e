"""Provisioned Clusters end to end on the real Temporal dev server and etcd, with the real
provisioning activities and workflow, and a scripted file-backed Provisioner below the adapter
boundary (tests/integration/provision_fake.py). The skylets run a local cluster in place of the
``skypilot`` manager, sized from the clusters the provisioner has UP, so jobs really run there.

What the user checks: the Cluster's phase and ``status.provision`` (progress, infra, nodes,
attempts, last error), that jobs run on it, and that nothing is left UP at the provisioner after
the Cluster is deleted (every launched name torn down), even when a control worker was killed
in the middle of a launch.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from skyshift.activities import provisioning
from skyshift.compat import base as compat_base
from skyshift.contract.provision import BACKOFF_ENV, MINUTE_ENV, sky_name
from skyshift.lifecycle import starter
from skyshift.lifecycle.converter import DATA_CONVERTER
from skyshift.models.cluster import Cluster
from tests.fixtures.temporal import LifecycleStack, _now
from tests.integration.provision_fake import STATE_ENV, FileProvisioner, local_for

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]
HISTORIES = Path(__file__).parent.parent / "workflows" / "histories"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileProvisioner]:
    """The file provisioner, registered for this process's control worker and skylets."""
    prov = FileProvisioner.create(tmp_path / "sky.json")
    monkeypatch.setenv(BACKOFF_ENV, "0.2")
    monkeypatch.setenv(MINUTE_ENV, "1")  # idleMinutes: 1 -> one second
    monkeypatch.setenv(STATE_ENV, str(prov.path))
    provisioning.register_provisioner("skypilot", lambda: prov)
    compat_base.register_manager("skypilot", local_for(prov, tmp_path / "sky-local"))
    yield prov
    provisioning._REGISTRY.pop("skypilot", None)
    compat_base._REGISTRY.pop("skypilot", None)


@pytest_asyncio.fixture
async def stack(lifecycle_stack: LifecycleStack,
                fake: FileProvisioner) -> AsyncIterator[LifecycleStack]:
    yield lifecycle_stack


async def create(s: LifecycleStack, name: str, **provision: Any) -> dict[str, Any]:
    """A Cluster as the API stores it (validated by the model), then its lifecycle started."""
    model = Cluster.model_validate({
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "generation": 1,
                     "creationTimestamp": _now()},
        "spec": {"provision": provision},
    })
    obj = model.model_dump(mode="json", exclude_none=True)
    obj["status"] = {"phase": "Init"}
    created: dict[str, Any] = await s.store.create("clusters", obj)
    await starter.ensure_lifecycle(s.client, created)
    return created


async def status_where(s: LifecycleStack, name: str, what: str, check: Any,
                       timeout: float = 60) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await s.get("clusters", name)
        return obj if obj and check(obj["status"]) else None

    try:
        found: dict[str, Any] = await s.wait(f"{name}: {what}", probe, timeout)
        return found
    except AssertionError:
        raise AssertionError(f"{name} never {what}: {await s.get('clusters', name)}") from None


async def gone(s: LifecycleStack, name: str, timeout: float = 60) -> None:
    async def probe() -> bool:
        return await s.get("clusters", name) is None

    await s.wait(f"cluster {name} removed", probe, timeout)


async def test_provision_to_ready_runs_jobs_and_delete_tears_down(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process()
    fake.script(delay=5.0)
    c = await create(s, "pv-a", infra="slurm/sim-1", cpus=2, memory="4Gi",
                     nodes={"min": 2})
    sky0 = sky_name("pv-a", c["metadata"]["uid"], 0)
    # progress while launching: the provisioner's lines in status, with an ETA
    seen = await status_where(
        s, "pv-a", "showed launch progress",
        lambda st: st.get("phase") == "Provisioning"
        and "waiting for" in ((st.get("provision") or {}).get("message") or ""))
    block = seen["status"]["provision"]
    assert block["infra"] == "slurm/sim-1" and block["attempts"] == 1 and block["eta"]
    ready = await s.cluster_phase("pv-a", "Ready")
    block = ready["status"]["provision"]
    assert block["skyClusters"] == [sky0] and block["nodes"] == 2 and not block.get("eta")
    assert fake.up()[sky0]["nodes"] == 2 and fake.up()[sky0]["infra"] == "slurm/sim-1"
    assert ready["spec"]["manager"] == "skypilot"
    # a 2-replica job runs on it
    await s.submit("on-sky", "echo hi; sleep 1", replicas=2, cpus=1)
    done = await s.job_phase("on-sky", "Succeeded")
    assert done["status"]["placement"] == {"pv-a": 2}
    await s.delete("clusters", "pv-a")
    await gone(s, "pv-a")
    assert fake.up() == {}
    assert fake.calls("down") == [sky0]


async def test_capacity_is_retried_then_fails_over_to_a_candidate(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process()
    fake.script(capacity={"slurm/full": -1})
    c = await create(s, "pv-b", infra="slurm/full", candidates=["kubernetes/ctx-b"])
    sky0 = sky_name("pv-b", c["metadata"]["uid"], 0)
    ready = await s.cluster_phase("pv-b", "Ready")
    block = ready["status"]["provision"]
    assert block["infra"] == "kubernetes/ctx-b" and block["skyClusters"] == [sky0]
    assert block["attempts"] == 4  # three on the full infra, one on the candidate
    assert "no nodes free on slurm/full" in block["lastError"]
    assert fake.calls("launch", "slurm/full") == [sky0] * 3
    assert fake.calls("launch", "kubernetes/ctx-b") == [sky0]
    assert fake.up()[sky0]["infra"] == "kubernetes/ctx-b"
    await s.delete("clusters", "pv-b")
    await gone(s, "pv-b")
    assert fake.up() == {}
    await replays(s, "cluster/pv-b", "cluster_provisioned_failover")


async def test_no_capacity_anywhere_ends_failed(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process(skylets=False)
    fake.script(capacity={"slurm/x": -1, "slurm/y": -1})
    await create(s, "pv-f", infra="slurm/x", candidates=["slurm/y"])
    failed = await s.cluster_phase("pv-f", "Failed")
    assert "no capacity on slurm/x, slurm/y" in failed["status"]["message"]
    assert len(fake.calls("launch")) == 6
    await s.delete("clusters", "pv-f")
    await gone(s, "pv-f")
    assert fake.up() == {}


async def test_permanent_error_fails_at_once_without_retries(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process(skylets=False)
    fake.script(permanent={"aws/us-east-1": "no AWS credentials found (aws configure)"})
    await create(s, "pv-c", infra="aws/us-east-1", candidates=["slurm/sim-1"])
    failed = await s.cluster_phase("pv-c", "Failed")
    assert "no AWS credentials found" in failed["status"]["message"]
    await asyncio.sleep(2.0)  # ten backoffs' worth: no retry storm, no failover either
    assert fake.calls("launch") == [sky_name("pv-c", failed["metadata"]["uid"], 0)]
    obj = await s.get("clusters", "pv-c")
    assert obj is not None and obj["status"]["phase"] == "Failed"
    await s.delete("clusters", "pv-c")
    await gone(s, "pv-c")
    assert fake.up() == {}


async def test_teardown_errors_are_retried_until_it_succeeds(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process(skylets=False)
    fake.script(permanent={"slurm/off": "partition disabled"})
    c = await create(s, "pv-g", infra="slurm/off")
    sky0 = sky_name("pv-g", c["metadata"]["uid"], 0)
    await s.cluster_phase("pv-g", "Failed")
    fake.script(down_failures=2)
    await s.delete("clusters", "pv-g")
    seen = await status_where(s, "pv-g", "said why teardown waits",
                              lambda st: "cannot tear down" in st.get("message", ""))
    assert "credentials expired" in seen["status"]["provision"]["lastError"]
    await gone(s, "pv-g")
    assert fake.calls("down") == [sky0] * 3  # kept trying; never gave up and leaked it


async def test_delete_while_provisioning_leaves_nothing(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process(skylets=False)
    fake.script(delay=3.0)
    c = await create(s, "pv-d", infra="slurm/sim-1")
    sky0 = sky_name("pv-d", c["metadata"]["uid"], 0)
    await status_where(s, "pv-d", "started launching",
                       lambda st: st.get("phase") == "Provisioning"
                       and (st.get("provision") or {}).get("attempts"))
    assert sky0 in fake.read()["clusters"]
    await s.delete("clusters", "pv-d")
    await gone(s, "pv-d")
    assert fake.up() == {}
    assert fake.calls("down") == [sky0]


async def test_waiting_job_scales_up_then_idle_teardown(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process()
    c = await create(s, "pv-e", infra="slurm/sim-1", cpus=1, nodes={"min": 1, "max": 3},
                     idleMinutes=6)
    uid = c["metadata"]["uid"]
    await s.cluster_phase("pv-e", "Ready")
    fake.script(delay=1.0)
    # 3 replicas x 1 cpu on a 1-node, 1-cpu cluster: it must grow by two nodes
    await s.submit("wide", "sleep 2", replicas=3, cpus=1)
    pending = await s.wait("pending reason", lambda: _message(s, "wide", "provisioning pv-e"))
    assert "ETA" in pending
    done = await s.job_phase("wide", "Succeeded", timeout=90)
    assert done["status"]["placement"] == {"pv-e": 3}
    sky1 = sky_name("pv-e", uid, 1)
    assert fake.calls("launch") == [sky_name("pv-e", uid, 0), sky1]
    assert fake.read()["clusters"][sky1]["nodes"] == 2
    # idle (6 "minutes" of a second each): the added group goes first, then the whole cluster
    await status_where(s, "pv-e", "scaled back", lambda st: st.get("provision", {}).get(
        "skyClusters") == [sky_name("pv-e", uid, 0)], timeout=30)
    await gone(s, "pv-e", timeout=30)
    assert fake.up() == {}
    await replays(s, "cluster/pv-e", "cluster_provisioned_scaled_idle")


async def replays(s: LifecycleStack, wf_id: str, label: str) -> None:
    """The finished workflow's history replays against the code (determinism); recorded into
    tests/workflows/histories with SKYSHIFT_RECORD_HISTORIES=1, so later changes replay it."""
    from temporalio.worker import Replayer

    from skyshift.workers.control import WORKFLOWS

    history = await s.client.get_workflow_handle(wf_id).fetch_history()
    if os.environ.get("SKYSHIFT_RECORD_HISTORIES") == "1":
        HISTORIES.mkdir(parents=True, exist_ok=True)
        (HISTORIES / f"{label}.json").write_text(history.to_json())
    result = await Replayer(workflows=WORKFLOWS, data_converter=DATA_CONVERTER).replay_workflow(
        history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def _message(s: LifecycleStack, job: str, want: str) -> str | None:
    obj = await s.get("jobs", job)
    msg = str((obj or {}).get("status", {}).get("message") or "")
    return msg if want in msg else None


async def test_control_worker_killed_mid_launch_adopts_and_leaks_nothing(
    stack: LifecycleStack, fake: FileProvisioner,
) -> None:
    s = stack
    s.start_in_process(control=False)  # skylets here, the control worker as a process
    fake.script(delay=4.0)
    s_control = await _start_fake_control(s)
    c = await create(s, "pv-k", infra="slurm/sim-1", nodes={"min": 2})
    sky0 = sky_name("pv-k", c["metadata"]["uid"], 0)
    await status_where(s, "pv-k", "mid-launch",
                       lambda st: "waiting for" in ((st.get("provision") or {}).get(
                           "message") or ""))
    s_control.send_signal(signal.SIGKILL)
    s_control.wait()
    assert fake.read()["clusters"][sky0]["state"] == "INIT"  # the launch died with the worker
    fake.script(delay=0.5)
    await _start_fake_control(s)
    ready = await s.cluster_phase("pv-k", "Ready", timeout=90)
    # the retried launch adopted the same cluster: one record, launched twice, UP
    assert ready["status"]["provision"]["skyClusters"] == [sky0]
    assert list(fake.read()["clusters"]) == [sky0]
    assert fake.read()["clusters"][sky0]["launches"] == 2
    await s.delete("clusters", "pv-k")
    await gone(s, "pv-k")
    assert fake.up() == {}


async def _start_fake_control(s: LifecycleStack) -> Any:
    """``python -m tests.integration.provision_fake``: the control worker with the fake."""
    import subprocess
    import sys

    ready = s.tmp / "home" / "run" / "control.ready"
    ready.unlink(missing_ok=True)
    log = (s.tmp / "control.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration.provision_fake"],
                            env=s.env(), stdout=log, stderr=log, start_new_session=True)
    s.procs["control"] = proc
    for _ in range(300):
        if ready.exists():
            return proc
        assert proc.poll() is None, (s.tmp / "control.log").read_text()[-3000:]
        await asyncio.sleep(0.1)
    raise AssertionError("control worker never became ready")
