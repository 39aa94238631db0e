"""A job's env values reach its replicas but no Temporal workflow history (the Temporal UI and
API show histories to anyone who can reach them)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.fixtures.temporal import LifecycleStack

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

SECRET = "hunter2-7f3a9c1e-not-for-temporal"


def payload_texts(node: Any) -> list[str]:
    """The decoded data of every payload in a history's JSON form (payloads are base64)."""
    out: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("data"), str) and "metadata" in node:
            out.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
        for value in node.values():
            out += payload_texts(value)
    elif isinstance(node, list):
        for value in node:
            out += payload_texts(value)
    return out


async def test_env_values_reach_the_replica_but_no_workflow_history(
    lifecycle_stack: LifecycleStack,
) -> None:
    import json

    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("lc-env")
    await s.cluster_phase("lc-env", "Ready")
    await s.submit("envjob", 'echo "token=$API_TOKEN mode=$MODE"', envs={
        "API_TOKEN": SECRET, "MODE": "mode-0c51e2"})
    await s.job_phase("envjob", "Succeeded")
    [rdir] = s.replica_dirs("lc-env")
    log = (s.state_dirs["lc-env"] / "replicas" / rdir / "log").read_text()
    assert f"token={SECRET} mode=mode-0c51e2" in log

    texts: list[str] = []
    async for wf in s.client.list_workflows():
        history = await s.client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        texts += payload_texts(json.loads(history.to_json()))
    joined = "\n".join(texts)
    assert "API_TOKEN" in joined  # the job's payloads were searched: the names are there
    assert SECRET not in joined and "mode-0c51e2" not in joined


async def test_submit_reads_values_of_this_job_only(store: Any) -> None:
    """The skylet fills values from the job with the same uid; a job deleted (or deleted and
    created again under the same name) since is a permanent error, not another job's values."""
    from temporalio.exceptions import ApplicationError

    from skyshift.activities.clusters import with_env_values
    from skyshift.compat.types import ReplicaSpec
    from skyshift.contract.jobs import JobRef
    from skyshift.lifecycle.envs import redact

    await store.create("jobs", {
        "apiVersion": "skyshift.io/v1", "kind": "Job",
        "metadata": {"name": "envread", "namespace": "default", "uid": "uid-now"},
        "spec": {"run": "true", "envs": {"TOKEN": "v2"}},
    })
    replicas = [ReplicaSpec("envread-0", "envread", "default", "uid-now", 0,
                            envs=redact({"TOKEN": "v1"}))]
    [got] = await with_env_values(store, JobRef("default", "envread", "uid-now"), replicas)
    assert got.envs == {"TOKEN": "v2"}
    for ref in (JobRef("default", "envread", "uid-old"), JobRef("default", "nosuch", "u")):
        with pytest.raises(ApplicationError) as err:
            await with_env_values(store, ref, replicas)
        assert err.value.non_retryable and "no longer exists" in str(err.value)
