"""Schedules end to end on the real Temporal dev server (its Schedules), etcd and a local cluster:
runs on an interval with a history limit, pause and resume, trigger, backfill, the CancelOther
overlap policy on pipeline runs, and deletion."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from skyshift.activities import spawn
from skyshift.contract.pipelines import SCHEDULE_LABEL
from skyshift.lifecycle import starter
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

JOB = {"run": "echo tick", "resources": {"cpus": 0.25}, "restartPolicy": "Never"}


async def create(s: LifecycleStack, name: str, **spec: Any) -> dict[str, Any]:
    manifest = {"kind": "Schedule", "metadata": {"name": name, "namespace": "default"},
                "spec": spec}
    return await spawn.create_and_start(s.store, s.client, manifest)


async def status_where(s: LifecycleStack, name: str, what: str, ok: Any,
                       timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await s.get("schedules", name, "default")
        return obj if obj and ok(obj["status"]) else None

    try:
        found: dict[str, Any] = await s.wait(what, check, timeout)
    except AssertionError:
        raise AssertionError(f"{what}: {await s.get('schedules', name, 'default')}") from None
    return found


async def runs_of(s: LifecycleStack, name: str, plural: str = "jobs") -> list[dict[str, Any]]:
    listed = await s.store.list(plural, "default", label_selector={SCHEDULE_LABEL: name})
    return sorted(listed.items, key=lambda o: o["metadata"]["name"])


async def change(s: LifecycleStack, name: str, **spec: Any) -> None:
    def mutate(o: dict[str, Any]) -> dict[str, Any]:
        o["spec"].update(spec)
        o["metadata"]["generation"] += 1
        return o

    obj = await s.store.guaranteed_update("schedules", name, "default", mutate)
    await starter.notify_spec_changed(s.client, obj)


async def ready(s: LifecycleStack, cluster: str) -> None:
    s.start_in_process()
    await s.add_cluster(cluster, cpus=4)
    await s.cluster_phase(cluster, "Ready")


async def test_interval_runs_keep_history_pause_and_trigger(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    await ready(s, "sc-a")
    await create(s, "tick", interval="2s", historyLimit=2, jobTemplate={
        "metadata": {"labels": {"team": "ml"}}, "spec": JOB})
    active = await status_where(s, "tick", "schedule Active", lambda st: st["phase"] == "Active")
    assert active["status"]["nextRunTimes"], active["status"]
    assert active["status"]["workflowId"] == "schedule/default/tick"
    after = await status_where(s, "tick", "4 runs", lambda st: st.get("runs", 0) >= 4)
    assert re.fullmatch(r"tick-\d{8}-\d{6}", after["status"]["lastRun"])
    jobs = await runs_of(s, "tick")
    assert jobs and all(j["metadata"]["labels"]["team"] == "ml" for j in jobs)
    assert after["status"]["lastRun"] in {j["metadata"]["name"] for j in jobs} | {""}

    async def pruned() -> bool:  # the newest 2 finished runs are kept (plus one running)
        done = [j for j in await runs_of(s, "tick")
                if j["status"].get("phase") == "Succeeded"
                and not j["metadata"].get("deletionTimestamp")]
        return len(done) <= 2

    await s.wait("runs beyond historyLimit deleted", pruned)

    await change(s, "tick", suspend=True)
    paused = await status_where(s, "tick", "schedule Paused", lambda st: st["phase"] == "Paused")
    desc = await s.client.get_schedule_handle("schedule/default/tick").describe()
    assert desc.schedule.state.paused
    runs = paused["status"]["runs"]
    await asyncio.sleep(5)  # two intervals and a half: a paused schedule runs nothing
    still = await s.get("schedules", "tick", "default")
    assert still is not None and still["status"]["runs"] == runs

    await starter.trigger_schedule(s.client, still)
    await status_where(s, "tick", "a triggered run while paused",
                       lambda st: st.get("runs", 0) == runs + 1)

    await change(s, "tick", suspend=False)
    await status_where(s, "tick", "Active again", lambda st: st["phase"] == "Active")
    await status_where(s, "tick", "runs again", lambda st: st.get("runs", 0) >= runs + 2)


async def test_backfill_runs_the_missed_times(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await ready(s, "sc-b")
    await create(s, "hourly", cron="0 * * * *", historyLimit=10, jobTemplate={"spec": JOB})
    sched = await status_where(s, "hourly", "Active", lambda st: st["phase"] == "Active")
    nxt = datetime.strptime(sched["status"]["nextRunTimes"][0], "%Y-%m-%dT%H:%M:%SZ")
    assert nxt.minute == 0 and nxt.second == 0
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = now - timedelta(hours=3, minutes=30), now - timedelta(minutes=30)
    await starter.backfill_schedule(s.client, sched, start, end, "AllowAll")
    await status_where(s, "hourly", "3 backfilled runs", lambda st: st.get("runs", 0) == 3)
    names = [j["metadata"]["name"] for j in await runs_of(s, "hourly")]
    want = [f"hourly-{t:%Y%m%d-%H%M%S}" for t in (now - timedelta(hours=h) for h in (3, 2, 1))]
    assert names == want
    for name in names:
        await s.job_phase(name, "Succeeded")


async def test_allow_all_runs_at_most_max_active_runs(lifecycle_stack: LifecycleStack) -> None:
    """Runs that never end, on a fast interval, side by side (AllowAll): the schedule keeps
    ``maxActiveRuns`` of them going and skips the rest, saying so in its status."""
    s = lifecycle_stack
    await ready(s, "sc-m")
    await create(s, "flood", interval="1s", overlapPolicy="AllowAll", maxActiveRuns=2,
                 jobTemplate={"spec": {"run": "sleep 300", "resources": {"cpus": 0.25}}})
    # status.runs is written once a run is created, so a skip can be reported before the
    # second run is counted: wait for both
    skipped = await status_where(
        s, "flood", "a run skipped for maxActiveRuns with 2 runs counted",
        lambda st: "2 runs still going (maxActiveRuns 2)" in st.get("message", "")
        and st.get("runs") == 2)
    assert skipped["status"]["runs"] == 2, skipped["status"]
    await asyncio.sleep(3)  # three more intervals: still two
    jobs = [j for j in await runs_of(s, "flood") if not j["metadata"].get("deletionTimestamp")]
    assert len(jobs) == 2, [j["metadata"]["name"] for j in jobs]
    still = await s.get("schedules", "flood", "default")
    assert still is not None and still["status"]["runs"] == 2
    await s.delete("schedules", "flood", "default")

    async def all_gone() -> bool:
        return (await s.get("schedules", "flood", "default") is None
                and not await runs_of(s, "flood"))

    await s.wait("the schedule and its runs removed", all_gone)


async def test_cancel_other_cancels_the_previous_pipeline_run_and_delete_cleans_up(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    await ready(s, "sc-c")
    slow = {"run": "sleep 120", "resources": {"cpus": 0.25}}
    await create(s, "nightly", interval="4s", overlapPolicy="CancelOther", pipelineTemplate={
        "spec": {"steps": [{"name": "train", "job": slow}]}})

    async def one_cancelled() -> list[dict[str, Any]] | None:
        runs = await runs_of(s, "nightly", "pipelines")
        return runs if any(p["status"].get("phase") == "Cancelled" for p in runs) else None

    runs = await s.wait("a run cancelled by the next one", one_cancelled, timeout=60)
    first = runs[0]
    assert first["status"]["phase"] == "Cancelled", [p["status"] for p in runs]
    assert first["status"]["steps"]["train"]["phase"] == "Cancelled"
    sched = await s.get("schedules", "nightly", "default")
    assert sched is not None
    await s.delete("schedules", "nightly", "default")

    async def all_gone() -> bool:
        jobs = (await s.store.list("jobs", "default")).items
        return (await s.get("schedules", "nightly", "default") is None
                and not await runs_of(s, "nightly", "pipelines")
                and not [j for j in jobs if j["metadata"]["name"].startswith("nightly-")])

    await s.wait("the schedule and its runs removed", all_gone)
    with pytest.raises(Exception, match=r"not found|NotFound"):
        await s.client.get_schedule_handle("schedule/default/nightly").describe()


async def test_a_stored_schedule_that_no_longer_validates_is_failed(
    lifecycle_stack: LifecycleStack,
) -> None:
    """Written by an older version, or by hand into etcd: the lifecycle says what is wrong."""
    s = lifecycle_stack
    await ready(s, "sc-d")
    obj = spawn.new_object({"kind": "Schedule", "metadata": {"name": "bad", "namespace": "default"},
                            "spec": {"cron": "0 * * * *", "jobTemplate": {"spec": JOB}}})
    obj["spec"]["cron"] = "61 * * * *"
    created = await s.store.create("schedules", obj)
    await starter.ensure_lifecycle(s.client, created)
    failed = await status_where(s, "bad", "Failed", lambda st: st["phase"] == "Failed")
    assert "minute 61 is out of range 0-59" in failed["status"]["message"]


async def test_runs_stop_when_the_owner_is_deleted_or_loses_its_rights(
    lifecycle_stack: LifecycleStack,
) -> None:
    """Issue 26: a deleted user's schedule kept creating runs (with the control plane's
    rights). Each run checks its owner (the API stamps it) still exists and may create jobs."""
    from skyshift.models.schedule import OWNER_USER_ANNOTATION

    s = lifecycle_stack
    await ready(s, "sc-owner")
    await s.store.create("users", {"kind": "User", "metadata": {"name": "carol"}, "spec": {}})
    role = await s.store.create("roles", {"kind": "Role", "metadata": {"name": "carol-jobs"},
                                          "spec": {"users": ["carol"], "namespaces": ["default"],
                                                   "rules": [{"resources": ["jobs"],
                                                              "actions": ["create"]}]}})
    await spawn.create_and_start(s.store, s.client, {
        "kind": "Schedule", "metadata": {"name": "owned", "namespace": "default",
                                         "annotations": {OWNER_USER_ANNOTATION: "carol"}},
        "spec": {"interval": "2s", "jobTemplate": {"spec": JOB}}})
    await status_where(s, "owned", "a run while carol may", lambda st: st.get("runs", 0) >= 1)

    await s.store.delete("roles", "carol-jobs", expected_rv=role["metadata"]["resourceVersion"])
    lost = await status_where(s, "owned", "runs skipped without the right",
                              lambda st: "may no longer create jobs" in st.get("message", ""))
    assert "its owner carol may no longer create jobs in namespace default" in lost["status"][
        "message"]

    await s.store.delete("users", "carol")
    gone = await status_where(s, "owned", "runs skipped for a deleted owner",
                              lambda st: "no longer exists" in st.get("message", ""))
    runs = gone["status"]["runs"]
    await asyncio.sleep(5)  # two intervals and a half: nothing more is created
    after = await s.get("schedules", "owned", "default")
    assert after is not None and after["status"]["runs"] == runs
    assert "skipped: its owner carol no longer exists" in after["status"]["message"]
    assert len(await runs_of(s, "owned")) <= runs
