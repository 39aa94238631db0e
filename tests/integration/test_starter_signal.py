"""The starter leaves the ``ensure`` signal out of a fresh start (issue #29): the input says the
same, and the signal cost every new Job and Service workflow a history event. A workflow that
already runs still gets it (a workflow tearing down an older object of the name hands over on
it)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from skyshift.lifecycle import starter
from skyshift.models.meta import now_iso

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "skyshift.io/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "creationTimestamp": now_iso(),
            "labels": {},
        },
        "spec": {"run": "true", "resources": {"cpus": 0.1, "memory": 0}},
        "status": {"phase": "Pending"},
    }


async def test_a_fresh_start_has_no_signal_a_running_workflow_gets_one(
    temporal_client: Client,
) -> None:
    obj = job(f"st-{uuid.uuid4().hex[:8]}")
    wf_id = await starter.ensure_lifecycle(temporal_client, obj)
    handle = temporal_client.get_workflow_handle(wf_id)
    try:
        first = [e.event_type async for e in handle.fetch_history_events()]
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED not in first
        assert await starter.ensure_lifecycle(temporal_client, obj) == wf_id
        again = [e.event_type async for e in handle.fetch_history_events()]
        assert again.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) == 1
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in again
    finally:
        await handle.terminate("test over")
