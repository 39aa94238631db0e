"""Preemption's candidates kept between the scheduler's rounds (``activities.holders``), against a
real etcd: after the first read a round reads only the jobs modified since (etcd filters them),
and still sees exactly what a full list of the jobs shows, deletions included."""

from __future__ import annotations

from typing import Any

import pytest

from skyshift.activities.holders import Holders
from skyshift.activities.preemption import running_of
from skyshift.store import ObjectStore

pytestmark = pytest.mark.integration


def job(name: str, ns: str = "default", phase: str = "Running", cluster: str = "c1",
        priority: int = 0) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": name, "namespace": ns, "uid": f"u-{name}"},
            "spec": {"priority": priority, "resources": {"cpus": 1}},
            "status": {"phase": phase, "placement": {cluster: 1} if phase != "Pending" else {}}}


async def keys(holders: Holders) -> list[str]:
    return sorted(r.key for r in await holders.read())


async def full_list(store: ObjectStore) -> list[str]:
    return sorted(r.key for r in running_of((await store.list("jobs")).items, set()))


async def test_reads_only_what_changed_and_matches_a_full_list(store: ObjectStore) -> None:
    for i in range(30):
        await store.create("jobs", job(f"run-{i}", ns="a" if i % 2 else "b"))
    for i in range(5):
        await store.create("jobs", job(f"wait-{i}", phase="Pending"))
    await store.create("clusters", {"kind": "Cluster", "metadata": {"name": "c1"}})
    holders = Holders(store)
    assert await keys(holders) == await full_list(store)
    assert len(await keys(holders)) == 30 and holders.decoded == 35

    # nothing changed: nothing is sent or decoded again
    assert await keys(holders) == await full_list(store)
    assert holders.decoded == 35

    # one job ends, one starts, one new one runs: three jobs read
    done = await store.get("jobs", "run-0", "b")
    done["status"]["phase"] = "Succeeded"
    await store.update("jobs", done)
    started = await store.get("jobs", "wait-0", "default")
    started["status"] = {"phase": "Running", "placement": {"c2": 2}}
    await store.update("jobs", started)
    await store.create("jobs", job("late", ns="c", priority=-3))
    got = await holders.read()
    assert sorted(r.key for r in got) == await full_list(store)
    assert holders.decoded == 38
    assert "b/run-0" not in {r.key for r in got}
    late = next(r for r in got if r.key == "c/late")
    assert (late.priority, late.placement) == (-3, {"c1": 1})
    assert next(r for r in got if r.key == "default/wait-0").placement == {"c2": 2}


async def test_a_deleted_job_is_no_candidate(store: ObjectStore) -> None:
    for i in range(4):
        await store.create("jobs", job(f"j{i}"))
    holders = Holders(store)
    assert len(await keys(holders)) == 4
    await store.delete("jobs", "j1", "default")
    assert await keys(holders) == ["default/j0", "default/j2", "default/j3"]
    # a delete and a create between two reads: the count alone would not tell
    await store.delete("jobs", "j2", "default")
    await store.create("jobs", job("j9"))
    assert await keys(holders) == await full_list(store) == [
        "default/j0", "default/j3", "default/j9"]


async def test_reads_in_batches_at_one_snapshot(store: ObjectStore,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ObjectStore, "list_batch", 4)
    for i in range(11):
        await store.create("jobs", job(f"j{i:02d}"))
    holders = Holders(store)
    assert len(await keys(holders)) == 11
    for i in range(0, 11, 2):  # six changed: two batches of changes
        obj = await store.get("jobs", f"j{i:02d}", "default")
        obj["spec"]["priority"] = 7
        await store.update("jobs", obj)
    got = await holders.read()
    assert holders.decoded == 17
    assert sorted(r.key for r in got if r.priority == 7) == [
        f"default/j{i:02d}" for i in range(0, 11, 2)]
