"""Issue 26: the scheduler's and the sync loop's activities check their input too.

Anyone who reaches Temporal can signal the scheduler a request or start a sync activity. A forged
request must not make ``place_batch`` write another job's status or signal a workflow that is not
the job's; one forged request among many must not stop every placement (it is dropped as "gone");
and ``enqueue_job``/``dequeue_job``/``sync_cluster`` refuse what is not a job or a cluster.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from skyshift.activities.scheduling import SchedulingActivities, trusted_entries
from skyshift.activities.sync import SkyletWithSync
from skyshift.activities.trust import INVALID_INPUT
from skyshift.contract.jobs import (
    DequeueRequest,
    EnqueueRequest,
    PlaceBatchInput,
    QueueEntry,
    SyncInput,
)
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import JobRequest

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def entry(key: str, workflow_id: str, uid: str = UID) -> QueueEntry:
    ns = key.split("/", 1)[0]
    req = JobRequest(key=key, uid=uid, namespace=ns, labels={}, priority=0, created=1.0,
                     replicas=1, per_replica=Resources(cpus=1.0))
    return QueueEntry(EnqueueRequest(workflow_id, 1, req))


FORGED = [
    entry("default/web", "job/other/victim"),          # the answer sent to another workflow
    entry("default/we\nb", "job/default/we\nb"),       # a name no job can have
    entry("default/../etc", "job/default/../etc"),     # a path in the etcd key
    entry("default/web", "job/default/web", uid="x/y"),
    entry("nokey", "job/nokey"),
]


def test_place_batch_drops_forged_requests_and_keeps_the_rest() -> None:
    good = entry("default/web", "job/default/web")
    kept, refused = trusted_entries(PlaceBatchInput([*FORGED, good]))
    assert kept.jobs == [good]
    assert [o.status for o in refused] == ["gone"] * len(FORGED)
    assert all(o.message.startswith("refused: ") for o in refused)


async def run(fn: Any, arg: Any) -> None:
    await ActivityEnvironment().run(fn, arg)


@pytest.mark.parametrize("bad", FORGED)
async def test_enqueue_refuses_a_forged_request(bad: QueueEntry) -> None:
    acts = SchedulingActivities(store=None, client=None)  # type: ignore[arg-type]
    with pytest.raises(ApplicationError) as err:
        await run(acts.enqueue_job, bad.req)  # refused before the client is touched
    assert err.value.type == INVALID_INPUT and err.value.non_retryable


async def test_dequeue_refuses_a_key_that_is_no_job() -> None:
    acts = SchedulingActivities(store=None, client=None)  # type: ignore[arg-type]
    with pytest.raises(ApplicationError) as err:
        await run(acts.dequeue_job, DequeueRequest("default/a\nb"))
    assert err.value.type == INVALID_INPUT


@pytest.mark.parametrize("inp", [
    SyncInput("bad\ncluster", UID),
    SyncInput("c1", "../uid"),
    SyncInput("c1", UID, lost_jobs=["service/default/web"]),
    SyncInput("c1", UID, lost_jobs=["job/default/a b"]),
])
async def test_sync_refuses_a_forged_input(inp: SyncInput) -> None:
    acts = SkyletWithSync(None, None, client=None)  # type: ignore[arg-type]
    with pytest.raises(ApplicationError) as err:
        await run(acts.sync_cluster, inp)
    assert err.value.type == INVALID_INPUT
