"""Lifecycle hooks through the API: which writes notify the lifecycle plane, and how DELETE
hands objects with a lifecycle to their workflow (finalizer semantics).

The lifecycle here is RecordingLifecycle, a double of the API's own Lifecycle protocol (the
Temporal side is tested with the workflows); etcd is real.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from skyshift.store import ObjectStore
from tests.fixtures.api import RecordingLifecycle, add_sample_clusters, sample

# Until tests/conftest.py lists it: load the API fixtures for this module.
pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_job_hooks_on_create_update_delete(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle, store: ObjectStore
) -> None:
    c = api_client
    job = (await c.post("/default/jobs", json=sample("jobs", "hooked"))).json()
    assert api_lifecycle.calls == [("created", "Job", "default", "hooked")]
    assert api_lifecycle.objects[-1]["metadata"]["uid"] == job["metadata"]["uid"]

    # Metadata-only changes are not the workflow's business.
    r = await c.patch(
        "/default/jobs/hooked",
        headers=MERGE,
        content=json.dumps({"metadata": {"labels": {"x": "y"}}}),
    )
    assert r.status_code == 200
    assert api_lifecycle.hooks() == ["created"]

    job = r.json()
    job["spec"]["replicas"] = 5
    r = await c.put("/default/jobs/hooked", json=job)
    assert r.status_code == 200
    assert api_lifecycle.hooks() == ["created", "spec_changed"]
    assert api_lifecycle.objects[-1]["metadata"]["generation"] == 2

    r = await c.patch(
        "/default/jobs/hooked", headers=MERGE, content=json.dumps({"spec": {"priority": 10}})
    )
    assert api_lifecycle.hooks() == ["created", "spec_changed", "spec_changed"]
    assert api_lifecycle.objects[-1]["metadata"]["generation"] == 3

    r = await c.delete("/default/jobs/hooked")
    assert r.status_code == 202, r.text
    deleting = r.json()
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["status"]["phase"] == "Deleting"
    assert api_lifecycle.hooks()[-1] == "deleting"
    # The workflow removes it after teardown; until then it is still there, marked.
    stored = await store.get("jobs", "hooked", "default")
    assert stored["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]

    # A repeated DELETE re-notifies (idempotent) without touching the object again.
    r = await c.delete("/default/jobs/hooked")
    assert r.status_code == 202
    assert r.json()["metadata"]["resourceVersion"] == deleting["metadata"]["resourceVersion"]
    assert api_lifecycle.hooks()[-2:] == ["deleting", "deleting"]


async def test_delete_without_precondition_survives_a_concurrent_status_write(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle, store: ObjectStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workflow writes a job's status while the DELETE is between its read and its write:
    a DELETE without a resourceVersion still marks the job (it was a 409 the user had to
    retry); one with the resourceVersion it read is refused, as asked."""
    c = api_client
    assert (await c.post("/default/jobs", json=sample("jobs", "raced"))).status_code == 201
    read = store.get
    writes: list[int] = []

    async def read_then_status_write(plural: str, name: str, namespace: str | None = None) -> Any:
        obj = await read(plural, name, namespace)
        if plural == "jobs" and name == "raced":
            writes.append(len(writes))
            await store.guaranteed_update("jobs", name, namespace, lambda o: {
                **o, "status": {**(o.get("status") or {}), "phase": "Running",
                                "message": f"status write {len(writes)}"}})
        return obj

    monkeypatch.setattr(store, "get", read_then_status_write)
    before = await read("jobs", "raced", "default")
    r = await c.delete("/default/jobs/raced", params={
        "resourceVersion": before["metadata"]["resourceVersion"]})
    assert r.status_code == 409, r.text
    assert not (await read("jobs", "raced", "default"))["metadata"].get("deletionTimestamp")

    r = await c.delete("/default/jobs/raced")
    assert r.status_code == 202, r.text
    assert len(writes) == 2  # each DELETE raced with a status write
    stored = await read("jobs", "raced", "default")
    assert stored["metadata"]["deletionTimestamp"]
    assert stored["status"]["phase"] == "Deleting"
    assert api_lifecycle.hooks()[-1] == "deleting"


async def test_cluster_hooks(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle
) -> None:
    c = api_client
    assert (await c.post("/clusters", json=sample("clusters", "c9"))).status_code == 201
    r = await c.delete("/clusters/c9")
    assert r.status_code == 202 and r.json()["status"]["phase"] == "Deleting"
    assert api_lifecycle.calls == [
        ("created", "Cluster", None, "c9"),
        ("deleting", "Cluster", None, "c9"),
    ]


async def test_service_hooks(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle, store: ObjectStore
) -> None:
    """Services have a lifecycle (ServiceWorkflow): created, spec changes and DELETE go to it,
    and the object stays, marked Deleting, until the workflow has torn it down."""
    c = api_client
    created = await c.post("/default/services", json=sample("services", "s"))
    assert created.status_code == 201 and created.json()["status"]["phase"] == "Pending"
    r = await c.patch("/default/services/s", headers=MERGE,
                      content=json.dumps({"spec": {"primaryCluster": "k1"}}))
    assert r.status_code == 200
    r = await c.delete("/default/services/s")
    assert r.status_code == 202 and r.json()["status"]["phase"] == "Deleting"
    assert (await c.get("/default/services/s")).status_code == 200
    assert api_lifecycle.calls == [
        ("created", "Service", "default", "s"),
        ("spec_changed", "Service", "default", "s"),
        ("deleting", "Service", "default", "s"),
    ]


async def test_kinds_without_lifecycle_delete_at_once(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle, store: ObjectStore
) -> None:
    c = api_client
    await add_sample_clusters(store)
    assert (await c.post("/default/endpoints", json=sample("endpoints", "e"))).status_code == 201
    r = await c.delete("/default/endpoints/e")
    assert r.status_code == 200
    assert (await c.get("/default/endpoints/e")).status_code == 404
    assert api_lifecycle.calls == []


async def test_without_lifecycle_jobs_delete_at_once(
    api_client_nolc: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = api_client_nolc
    assert (await c.post("/default/jobs", json=sample("jobs", "gone"))).status_code == 201
    r = await c.delete("/default/jobs/gone")
    assert r.status_code == 200
    assert (await store.list("jobs", "default")).items == []


async def test_hook_failure_does_not_fail_the_write(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle, store: ObjectStore
) -> None:
    api_lifecycle.fail = True
    r = await api_client.post("/default/jobs", json=sample("jobs", "resilient"))
    assert r.status_code == 201
    assert await store.get("jobs", "resilient", "default")
    assert api_lifecycle.hooks() == ["created"]
    r = await api_client.delete("/default/jobs/resilient")
    assert r.status_code == 202  # marked; the reconciler re-notifies the workflow


async def test_failed_request_calls_no_hook(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle
) -> None:
    c = api_client
    bad = sample("jobs", "bad")
    bad["spec"]["replicas"] = -1
    assert (await c.post("/default/jobs", json=bad)).status_code == 422
    job = (await c.post("/default/jobs", json=sample("jobs", "ok"))).json()
    job["metadata"]["resourceVersion"] = "1"
    job["spec"]["replicas"] = 9
    assert (await c.put("/default/jobs/ok", json=job)).status_code == 409
    assert api_lifecycle.hooks() == ["created"]


async def test_logs_and_exec(
    api_client: httpx.AsyncClient, api_lifecycle: RecordingLifecycle
) -> None:
    c = api_client
    await c.post("/default/jobs", json=sample("jobs", "lj"))
    r = await c.get("/default/jobs/lj/logs", params={"tail": 5, "rank": 1})
    assert r.status_code == 200 and r.text == api_lifecycle.log_text
    assert r.headers["content-type"].startswith("text/plain")
    assert api_lifecycle.logs_args == [(5, 1)]

    r = await c.post("/default/jobs/lj/exec", json={"command": ["ls", "-l"], "rank": 1})
    assert r.status_code == 200
    assert r.json() == {"exit_code": 0, "stdout": "ok\n", "stderr": ""}
    assert api_lifecycle.exec_args == [(["ls", "-l"], 1)]

    r = await c.post("/default/jobs/lj/exec", json={"command": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "command"
    r = await c.get("/default/jobs/nope/logs")
    assert r.status_code == 404


async def test_logs_without_lifecycle_is_503(api_client_nolc: httpx.AsyncClient) -> None:
    c = api_client_nolc
    await c.post("/default/jobs", json=sample("jobs", "lj"))
    r = await c.get("/default/jobs/lj/logs")
    assert r.status_code == 503
    assert "lifecycle" in r.json()["error"]["message"]
    r = await c.post("/default/jobs/lj/exec", json={"command": ["true"]})
    assert r.status_code == 503
