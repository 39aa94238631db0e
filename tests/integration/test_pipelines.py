"""Pipelines end to end on the real Temporal dev server, etcd and a local cluster: the DAG order,
parameters, retries, onFailure (Fail, SkipDownstream, Continue), cancel and delete."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.activities import spawn
from skyshift.contract.jobs import replica_name
from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


def step(name: str, run: str, *deps: str, **extra: Any) -> dict[str, Any]:
    job = {"run": run, "resources": {"cpus": 0.25}, "restartPolicy": "Never"}
    return {"name": name, "dependsOn": list(deps), "job": job, **extra}


async def create(s: LifecycleStack, name: str, steps: list[dict[str, Any]],
                 **spec: Any) -> dict[str, Any]:
    manifest = {"kind": "Pipeline", "metadata": {"name": name, "namespace": "default"},
                "spec": {"steps": steps, **spec}}
    return await spawn.create_and_start(s.store, s.client, manifest)


async def phase(s: LifecycleStack, name: str, want: str, timeout: float = 90) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await s.get("pipelines", name, "default")
        return obj if obj and obj["status"].get("phase") == want else None

    try:
        found: dict[str, Any] = await s.wait(f"pipeline {name} {want}", check, timeout)
    except AssertionError:
        raise AssertionError(f"{await s.get('pipelines', name, 'default')}") from None
    return found


async def ready(s: LifecycleStack, cluster: str) -> None:
    s.start_in_process()
    await s.add_cluster(cluster, cpus=4)
    await s.cluster_phase(cluster, "Ready")


def log_of(s: LifecycleStack, cluster: str, job: dict[str, Any]) -> str:
    prefix = replica_name(job["metadata"]["name"], job["metadata"]["uid"], 0)
    out = ""
    for rdir in s.replica_dirs(cluster):
        if rdir.startswith(prefix):
            out += (s.state_dirs[cluster] / "replicas" / rdir / "log").read_text()
    return out


async def test_diamond_runs_in_dependency_order_with_parameters(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    await ready(s, "pl-a")
    stamp = "date +%s%N > /dev/null; echo {{ params.word }}"
    await create(s, "dia", [
        step("fetch", f"{stamp}-fetch; sleep 1"),
        step("left", f"{stamp}-left", "fetch"),
        step("right", f"{stamp}-right", "fetch"),
        step("join", "echo joined", "left", "right"),
    ], parameters={"word": "hello"})
    done = await phase(s, "dia", "Succeeded")
    steps = done["status"]["steps"]
    assert {n: st["phase"] for n, st in steps.items()} == dict.fromkeys(
        ["fetch", "left", "right", "join"], "Succeeded")
    assert steps["join"]["job"] == "dia-join" and steps["fetch"]["attempts"] == 1
    # a step starts only after what it depends on ended
    fetch_end = (await s.get("jobs", "dia-fetch"))["status"]["completionTime"]
    for name in ("left", "right"):
        assert steps[name]["startTime"] >= fetch_end
    assert steps["join"]["startTime"] >= max(steps["left"]["completionTime"],
                                             steps["right"]["completionTime"])
    left = await s.get("jobs", "dia-left")
    assert left is not None
    assert left["metadata"]["labels"]["skyshift.io/pipeline"] == "dia"
    assert "hello-left" in log_of(s, "pl-a", left)
    assert done["status"]["completionTime"]
    assert done["status"]["workflowId"] == "pipeline/default/dia"


async def test_retries_then_fail_stops_the_rest(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await ready(s, "pl-b")
    await create(s, "rty", [
        step("flaky", "exit 4", retries=2),
        step("long", "sleep 60"),
        step("after", "echo never", "flaky"),
    ])
    failed = await phase(s, "rty", "Failed")
    steps = failed["status"]["steps"]
    assert steps["flaky"]["phase"] == "Failed" and steps["flaky"]["attempts"] == 3
    assert "after 3 attempts" in steps["flaky"]["message"]
    assert steps["long"]["phase"] == "Cancelled"
    assert steps["after"]["phase"] == "Skipped"
    assert "step flaky failed" in failed["status"]["message"]
    # every attempt was a Job of its own (kept for its logs); the cancelled one is deleted
    for name in ("rty-flaky", "rty-flaky-2", "rty-flaky-3"):
        job = await s.get("jobs", name)
        assert job is not None and job["status"]["phase"] == "Failed", name

    async def long_gone() -> bool:
        return await s.get("jobs", "rty-long") is None

    await s.wait("the cancelled step's job deleted", long_gone)


async def test_skip_downstream_and_continue(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await ready(s, "pl-c")
    await create(s, "skp", [
        step("bad", "exit 1", onFailure="SkipDownstream"),
        step("child", "echo child", "bad"),
        step("grandchild", "echo gc", "child"),
        step("other", "echo other"),
        step("meh", "exit 2", onFailure="Continue"),
        step("after-meh", "echo runs", "meh"),
    ])
    failed = await phase(s, "skp", "Failed")
    got = {n: st["phase"] for n, st in failed["status"]["steps"].items()}
    assert got == {"bad": "Failed", "child": "Skipped", "grandchild": "Skipped",
                   "other": "Succeeded", "meh": "Failed", "after-meh": "Succeeded"}
    assert failed["status"]["steps"]["grandchild"]["message"] == "skipped: step child skipped"

    await create(s, "cont", [step("meh", "exit 2", onFailure="Continue"),
                             step("next", "echo ok", "meh")])
    ok = await phase(s, "cont", "Succeeded")
    assert ok["status"]["steps"]["meh"]["phase"] == "Failed"
    assert ok["status"]["steps"]["next"]["phase"] == "Succeeded"


async def test_cancel_then_delete_removes_every_job(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await ready(s, "pl-d")
    await create(s, "cnl", [step("slow", "sleep 120"), step("then", "echo x", "slow")])

    async def slow_running() -> bool:
        job = await s.get("jobs", "cnl-slow")
        return bool(job and job["status"].get("phase") == "Running")

    await s.wait("the first step running", slow_running)

    def cancel(o: dict[str, Any]) -> dict[str, Any]:
        o["spec"]["cancel"] = True
        o["metadata"]["generation"] += 1
        return o

    from skyshift.lifecycle import starter

    obj = await s.store.guaranteed_update("pipelines", "cnl", "default", cancel)
    await starter.notify_spec_changed(s.client, obj)
    cancelled = await phase(s, "cnl", "Cancelled")
    assert cancelled["status"]["steps"]["slow"]["phase"] == "Cancelled"
    assert cancelled["status"]["steps"]["then"]["phase"] == "Cancelled"

    async def slow_gone() -> bool:
        return await s.get("jobs", "cnl-slow") is None

    await s.wait("the running step's job deleted", slow_gone)

    await create(s, "del", [step("a", "echo a"), step("b", "sleep 120", "a")])

    async def b_running() -> bool:
        job = await s.get("jobs", "del-b")
        return bool(job and job["status"].get("phase") == "Running")

    await s.wait("step b running", b_running)
    await s.delete("pipelines", "del", "default")

    async def all_gone() -> bool:
        return all([await s.get("pipelines", "del", "default") is None,
                    await s.get("jobs", "del-a") is None, await s.get("jobs", "del-b") is None])

    await s.wait("the pipeline and its jobs removed", all_gone)
    assert s.replica_dirs("pl-d") == [] or all(
        "del" not in d for d in s.replica_dirs("pl-d"))


async def test_a_job_deleted_by_hand_fails_its_step(lifecycle_stack: LifecycleStack) -> None:
    s = lifecycle_stack
    await ready(s, "pl-e")
    await create(s, "hand", [step("slow", "sleep 120")])

    async def running() -> bool:
        job = await s.get("jobs", "hand-slow")
        return bool(job and job["status"].get("phase") == "Running")

    await s.wait("the step running", running)
    await s.delete("jobs", "hand-slow", "default")
    failed = await phase(s, "hand", "Failed")
    assert failed["status"]["steps"]["slow"]["message"] == "its job was deleted"


async def test_a_lost_pipeline_workflow_is_restarted_and_takes_its_jobs_back(
    lifecycle_stack: LifecycleStack,
) -> None:
    """The workflow is terminated mid-run (as if its history were lost): the reconciler starts
    it again, and the new run takes over the step job that exists instead of failing on it."""
    s = lifecycle_stack
    await ready(s, "pl-f")
    await create(s, "lost", [step("one", "sleep 3"), step("two", "echo two", "one")])

    async def one_running() -> bool:
        job = await s.get("jobs", "lost-one")
        return bool(job and job["status"].get("phase") == "Running")

    await s.wait("step one running", one_running)
    first = await s.get("jobs", "lost-one")
    await s.client.get_workflow_handle("pipeline/default/lost").terminate("lost on purpose")
    done = await phase(s, "lost", "Succeeded")
    assert done["status"]["steps"]["one"]["attempts"] == 1
    again = await s.get("jobs", "lost-one")
    assert first is not None and again is not None
    assert again["metadata"]["uid"] == first["metadata"]["uid"]  # the same job, not a new one
    assert await s.get("jobs", "lost-one-2") is None
