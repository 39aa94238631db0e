"""The ray manager's submit takes a sync round's recent listing for first attempts instead of
listing the jobs again, and lists afresh where the listing could mislead it: a restart, a retried
activity attempt, an old listing, a delete since. A sync round's ``state()`` takes its
``replicas()`` listing, and the nodes listed under a second before. The Jobs API below the
adapter is a fake (a dict of submissions); the real one is
tests/integration/test_contract_ray.py."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.compat.base import RESUBMIT
from skyshift.compat.ray import adapter as ray_adapter
from skyshift.compat.ray.adapter import RayManager
from skyshift.compat.ray.map import RayMeta, submission_id
from skyshift.compat.types import NodeState, ReplicaSpec
from skyshift.models.quantity import Resources
from tests.fixtures.compat import make_spec, new_job


class FakeJobs:
    """Ray's job table: submit_job refuses an id it has ("already exists"), as Ray does."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.lists = 0
        self.submits: list[str] = []

    def list_jobs(self) -> list[dict[str, Any]]:
        self.lists += 1
        return [dict(j) for j in self.jobs.values()]

    def submit_job(self, **kw: Any) -> str:
        sid = kw["submission_id"]
        if sid in self.jobs:
            raise RuntimeError(f"Job with submission_id {sid} already exists. "
                               "Please use a different submission_id.")
        self.submits.append(sid)
        self.jobs[sid] = {"submission_id": sid, "status": "PENDING",
                          "metadata": kw["metadata"], "entrypoint": kw["entrypoint"]}
        return str(sid)

    def get_job_info(self, sid: str) -> dict[str, Any]:
        if sid not in self.jobs:
            raise RuntimeError("Request failed with status code 404: job not found")
        return dict(self.jobs[sid])

    def stop_job(self, sid: str) -> bool:
        self.jobs[sid]["status"] = "STOPPED"
        return True

    def delete_job(self, sid: str) -> bool:
        self.jobs.pop(sid, None)
        return True


def manager() -> tuple[RayManager, FakeJobs]:
    m = RayManager("r1", {"address": "http://127.0.0.1:1"})
    fake = FakeJobs()
    m._client = fake
    big = Resources(cpus=8, memory=8192)
    m._nodes_seen = [NodeState(name="head", capacity=big, allocatable=big)]
    return m, fake


def spec(attempt: int = 0, job: tuple[str, str] | None = None) -> ReplicaSpec:
    return make_spec("true", job=job or new_job(), attempt=attempt)


async def test_a_first_attempt_right_after_a_round_is_sent_without_listing() -> None:
    m, fake = manager()
    await m.replicas()  # the sync round
    [status] = await m.submit([spec()])
    assert fake.lists == 1 and fake.submits == [status.name]


async def test_a_first_attempt_that_landed_since_the_listing_is_adopted_not_sent_twice() -> None:
    m, fake = manager()
    await m.replicas()
    one = spec()
    await m.submit([one])
    [again] = await m.submit([one])  # the listing predates the first submit
    assert again.name == one.name and again.job_uid == one.job_uid
    assert fake.submits == [submission_id(one.name, 0)] and fake.lists == 1


async def test_a_restart_lists_and_stops_the_earlier_attempt() -> None:
    m, fake = manager()
    job = new_job()
    await m.submit([spec(0, job)])
    await m.replicas()
    lists = fake.lists
    second = spec(1, job)
    await m.submit([second])
    assert fake.lists == lists + 2  # its own, then the delete's of the earlier attempt
    states = {sid: j["status"] for sid, j in fake.jobs.items()}
    assert states == {submission_id(second.name, 1): "PENDING"}


@pytest.mark.parametrize("why", ["retried", "old"])
async def test_the_listing_is_not_taken_when_it_may_mislead(why: str) -> None:
    m, fake = manager()
    await m.replicas()
    if why == "old":
        asked, jobs = m._listed
        m._listed = (asked - ray_adapter._SUBMIT_REUSE - 1, jobs)
    token = RESUBMIT.set(why == "retried")
    try:
        await m.submit([spec()])
    finally:
        RESUBMIT.reset(token)
    assert fake.lists == 2


async def test_a_replica_placed_again_after_a_delete_is_listed_afresh_and_sent() -> None:
    m, fake = manager()  # the listing of the round still shows the deleted job
    gone = spec()
    await m.submit([gone])
    await m.replicas()
    await m.delete([gone.name])
    lists = fake.lists
    [status] = await m.submit([gone])
    assert fake.lists == lists + 1
    assert fake.submits == [gone.name, gone.name] and status.state == "Pending"


async def test_a_name_taken_by_another_job_is_refused_through_ray_itself() -> None:
    m, fake = manager()
    await m.replicas()
    mine = spec()
    stranger = RayMeta.of(mine)
    stranger.job_uid = "someone-else"
    fake.jobs[mine.name] = {"submission_id": mine.name, "status": "RUNNING",
                            "metadata": stranger.to_metadata()}
    with pytest.raises(Exception, match="taken by job uid someone-else"):
        await m.submit([mine])


def with_nodes(m: RayManager) -> list[int]:
    """Give ``m`` one 8-CPU head node from a counted ``list_nodes``; returns the counter."""
    calls = [0]

    async def list_nodes() -> list[dict[str, Any]]:
        calls[0] += 1
        return [{"node_id": "a" * 16, "node_name": "head", "state": "ALIVE",
                 "is_head_node": True, "resources_total": {"CPU": 8.0, "memory": 8 * 2**30}}]

    m._list_nodes = list_nodes  # type: ignore[method-assign]
    return calls


def aged(stamp: tuple[float, list[dict[str, Any]]], by: float) -> tuple[float, list[Any]]:
    return (stamp[0] - by, stamp[1])


async def test_a_round_is_one_listing_of_jobs_and_the_nodes_once_a_second() -> None:
    m, fake = manager()
    nodes = with_nodes(m)
    await m.replicas()
    await m.state()
    assert (fake.lists, nodes[0]) == (1, 1)  # the round's list_jobs serves its state()
    m._listed = aged(m._listed, 0.2)  # a quick round 0.2 s later
    await m.replicas()
    await m.state()
    assert (fake.lists, nodes[0]) == (2, 1)  # its nodes: the last round's
    m._listed, m._nodes_listed = aged(m._listed, 1.0), aged(m._nodes_listed, 1.0)
    await m.state()  # a second on, without a round's listing: both asked again
    assert (fake.lists, nodes[0]) == (3, 2)


async def test_state_accounts_every_replica_its_round_reported() -> None:
    m, fake = manager()
    with_nodes(m)
    one = spec()
    await m.submit([one])
    reported = await m.replicas()
    fake.submit_job(submission_id="late", metadata=RayMeta.of(spec()).to_metadata(),
                    entrypoint="true")  # lands between the round's two calls
    state = await m.state()
    assert [r.name for r in reported] == [one.name]
    held = state.nodes[0].capacity.cpus - state.nodes[0].allocatable.cpus
    assert held == one.resources.cpus  # the round's snapshot: its one replica, not the late one


async def test_state_after_a_delete_lists_again_and_shows_the_room_freed() -> None:
    m, fake = manager()
    with_nodes(m)
    one = spec()
    await m.submit([one])
    await m.replicas()
    await m.delete([one.name])
    lists = fake.lists
    state = await m.state()
    assert fake.lists == lists + 1
    assert state.nodes[0].allocatable.cpus == state.nodes[0].capacity.cpus
