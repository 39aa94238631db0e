"""Issue 32: a scheduler round retried after Temporal lost its completion repeats its decision.

The bug: ``place_batch`` recorded placement {lc2: 1} for job s4b-019 and told the job; Temporal
died before the activity's completion was recorded; the retried attempt decided again from newer
capacity, told the job {local: 1} (ignored: the job takes the first answer to a request) and
overwrote etcd's placement. The replica ran on lc2 while etcd said local, and lc2's sweep killed it.

Here the activity runs on real etcd; only Temporal's client is a recorder of the signals sent.
Between the two attempts the world moves on (the first cluster fills up, the second frees), as it
did in the bug; each case asserts what the user and the job would see: the placement the job was
told, the placement etcd shows, and the scheduler's outcome, all the first decision.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from skyshift.activities.scheduling import SchedulingActivities
from skyshift.contract.jobs import (
    EnqueueRequest,
    PlaceBatchInput,
    PlaceBatchResult,
    Placement,
    QueueEntry,
)
from skyshift.contract.names import SIG_PLACED, job_workflow_id
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import JobRequest
from skyshift.store import ObjectStore

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]
Obj = dict[str, Any]


class Handle:
    def __init__(self, sent: list[tuple[str, str, Any]], wf_id: str) -> None:
        self.sent, self.wf_id = sent, wf_id

    async def signal(self, name: str, arg: Any) -> None:
        self.sent.append((self.wf_id, name, arg))


class Recorder:
    """Temporal's client as the activity uses it: every signal it sends, in order (a placement
    goes as a signal-with-start of the job's workflow, lifecycle/enqueue.tell_placed)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, wf_id: str) -> Handle:
        return Handle(self.sent, wf_id)

    async def start_workflow(self, workflow: Any, arg: Any = None, *, id: str,
                             start_signal: str, start_signal_args: list[Any], **_: Any) -> None:
        self.sent.append((id, start_signal, start_signal_args[0]))  # a running job's workflow

    def placements(self) -> dict[str, Placement]:
        return {wf: arg for wf, name, arg in self.sent if name == SIG_PLACED}


def cluster(name: str, cpus: float) -> Obj:
    node = {"cpus": cpus, "memory": 8 * 2**30, "gpus": 0, "accelerators": {}}
    full = {"cpus": 8.0, "memory": 8 * 2**30, "gpus": 0, "accelerators": {}}
    return {"kind": "Cluster", "metadata": {"name": name},
            "spec": {"manager": "local"},
            "status": {"phase": "Ready", "allocatable": {"n1": node}, "capacity": {"n1": full}}}


async def set_free(store: ObjectStore, name: str, cpus: float) -> None:
    def mutate(obj: Obj) -> Obj:
        obj["status"]["allocatable"]["n1"]["cpus"] = cpus
        return obj
    await store.guaranteed_update("clusters", name, None, mutate)


async def new_job(store: ObjectStore, name: str) -> QueueEntry:
    uid = str(uuid.uuid4())
    await store.create("jobs", {"kind": "Job", "metadata": {
        "name": name, "namespace": "default", "uid": uid, "generation": 1},
        "spec": {}, "status": {"phase": "Pending"}})
    req = JobRequest(key=f"default/{name}", uid=uid, namespace="default", labels={},
                     priority=0, created=1.0, replicas=1, per_replica=Resources(cpus=1.0))
    return QueueEntry(EnqueueRequest(job_workflow_id("default", name), 1, req))


async def place(store: ObjectStore, client: Recorder, entries: list[QueueEntry],
                attempt: int = 1, local: bool = False) -> PlaceBatchResult:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt, is_local=local)
    acts = SchedulingActivities(store, client)  # type: ignore[arg-type]
    return await env.run(acts.place_batch, PlaceBatchInput(entries, []))


async def stored(store: ObjectStore, name: str) -> Obj:
    return (await store.get("jobs", name, "default"))["status"]


async def world(store: ObjectStore) -> tuple[str, str]:
    """Two clusters; "a" has the room for one job now, "b" has none."""
    a, b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    await store.create("clusters", cluster(a, 1.0))
    await store.create("clusters", cluster(b, 0.0))
    return a, b


async def test_a_retry_after_the_world_moved_on_repeats_the_first_decision(
    store: ObjectStore,
) -> None:
    a, b = await world(store)
    job = await new_job(store, "s4b-019")
    first_client = Recorder()
    first = await place(store, first_client, [job])
    assert first.outcomes[0].assignments == {a: 1}
    # Temporal lost the completion; meanwhile a filled up and b freed: a new decision would be b
    await set_free(store, a, 0.0)
    await set_free(store, b, 4.0)
    retry_client = Recorder()
    again = await place(store, retry_client, [job], attempt=2)
    told = retry_client.placements()[job.req.workflow_id]
    assert (told.seq, told.assignments) == (1, {a: 1})
    assert again.outcomes[0].status == "placed" and again.outcomes[0].assignments == {a: 1}
    status = await stored(store, "s4b-019")
    assert status["placement"] == {a: 1}
    assert status["placementDecision"]["assignments"] == {a: 1}


async def test_a_later_round_after_an_undelivered_placement_repeats_it(
    store: ObjectStore,
) -> None:
    """The signal failed (or its answer was lost) after the decision was recorded: the next
    round, a new activity (attempt 1), finds the record and says the same again."""
    a, b = await world(store)
    job = await new_job(store, "lost-answer")
    await place(store, Recorder(), [job])
    await set_free(store, a, 0.0)
    await set_free(store, b, 4.0)
    job.undelivered = True
    client = Recorder()
    out = await place(store, client, [job])
    assert client.placements()[job.req.workflow_id].assignments == {a: 1}
    assert out.outcomes[0].assignments == {a: 1}
    assert (await stored(store, "lost-answer"))["placement"] == {a: 1}


async def test_a_round_that_did_not_look_still_cannot_record_a_second_answer(
    store: ObjectStore,
) -> None:
    """An attempt that decides without knowing of the record (it ran beside its retry) hits it
    when it writes: the compare-and-swap finds the request answered and repeats that answer."""
    a, b = await world(store)
    job = await new_job(store, "beside")
    await place(store, Recorder(), [job])
    await set_free(store, a, 0.0)
    await set_free(store, b, 4.0)
    client = Recorder()
    out = await place(store, client, [job])  # attempt 1, not flagged: decides b, then finds a
    assert client.placements()[job.req.workflow_id].assignments == {a: 1}
    assert out.outcomes[0].assignments == {a: 1}
    assert (await stored(store, "beside"))["placement"] == {a: 1}


async def test_a_retry_that_finds_no_room_still_repeats_the_placement(
    store: ObjectStore,
) -> None:
    """The first attempt placed the job; by the retry no cluster has room. Left pending, the
    job would run on a while the scheduler kept it queued and etcd showed it pending."""
    a, _ = await world(store)
    job = await new_job(store, "no-room")
    await place(store, Recorder(), [job])
    await set_free(store, a, 0.0)
    client = Recorder()
    out = await place(store, client, [job])
    assert out.outcomes[0].status == "placed" and out.outcomes[0].assignments == {a: 1}
    assert client.placements()[job.req.workflow_id].assignments == {a: 1}
    status = await stored(store, "no-room")
    assert status["placement"] == {a: 1} and status["phase"] == "Scheduled"


async def test_the_retry_holds_the_recorded_replicas_against_the_others(
    store: ObjectStore,
) -> None:
    """A retry that repeats job 1's placement on a counts it before placing job 2, which the
    first attempt never reached: job 2 does not land on the cpu job 1 already has."""
    a, b = await world(store)
    one, two = await new_job(store, "one"), await new_job(store, "two")
    await place(store, Recorder(), [one])  # the first attempt got as far as job 1
    await set_free(store, b, 1.0)
    out = await place(store, Recorder(), [one, two], attempt=2)
    assert [o.assignments for o in out.outcomes] == [{a: 1}, {b: 1}]


async def test_a_local_run_after_a_crash_holds_the_recorded_replicas_too(
    store: ObjectStore,
) -> None:
    """The scheduler runs place_batch as a local activity: after the control worker died the
    run is repeated from attempt 1, and it still finds job 1's answer (on a, which has filled
    up since) and does not decide job 1 again, onto the room job 2 gets."""
    a, b = await world(store)
    one, two = await new_job(store, "one"), await new_job(store, "two")
    await place(store, Recorder(), [one], local=True)  # the worker died after job 1
    await set_free(store, a, 0.0)
    await set_free(store, b, 1.0)
    out = await place(store, Recorder(), [one, two], local=True)
    assert [o.assignments for o in out.outcomes] == [{a: 1}, {b: 1}]
