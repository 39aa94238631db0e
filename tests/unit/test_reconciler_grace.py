"""The reconciler leaves just-created (or just-deleted) objects to the API, and repairs the rest.

Stand-ins here are below the worker: the store and Temporal's visibility answer from memory, and
the starter's two calls are recorded instead of sent (the real starter and visibility listing run
in tests/faults/test_lifecycle_temporal_return.py, where the reconciler, woken when Temporal is
back, starts the jobs created during a Temporal outage).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from skyshift.lifecycle import starter
from skyshift.workers import reconciler as rec


def stamp(ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(name: str, created_ago: float, deleting_ago: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "creationTimestamp": stamp(created_ago)}
    if deleting_ago is not None:
        meta["deletionTimestamp"] = stamp(deleting_ago)
    return {"metadata": meta, "status": {"phase": "Pending"}}


class Page:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items, self.continue_token = items, None


class Store:
    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = jobs

    async def list(self, plural: str, **_: Any) -> Page:
        return Page(self.jobs if plural == "jobs" else [])


class Client:
    """No workflow is running (what visibility shows right after a burst of starts)."""

    async def list_workflows(self, _query: str) -> AsyncIterator[Any]:
        return
        yield


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    async def ensure(_client: Any, obj: dict[str, Any]) -> None:
        seen.append(("ensure", obj["metadata"]["name"]))

    async def deleting(_client: Any, obj: dict[str, Any]) -> None:
        seen.append(("deleting", obj["metadata"]["name"]))

    monkeypatch.setattr(starter, "ensure_lifecycle", ensure)
    monkeypatch.setattr(starter, "notify_deleting", deleting)
    return seen


async def test_only_objects_older_than_the_grace_are_ensured(calls: list[tuple[str, str]]) -> None:
    store = Store([
        job("new", created_ago=1),
        job("old", created_ago=120),
        job("old-just-deleted", created_ago=120, deleting_ago=1),
        job("old-deleted-long-ago", created_ago=300, deleting_ago=120),
    ])
    r = rec.Reconciler(store, Client(), interval=30)  # type: ignore[arg-type]
    assert r.grace == rec.GRACE
    started = await r.reconcile_once()
    assert sorted(calls) == [("deleting", "old-deleted-long-ago"), ("ensure", "old")]
    assert started == 2


async def test_the_grace_is_at_most_twice_a_short_interval(calls: list[tuple[str, str]]) -> None:
    store = Store([job("a", created_ago=5), job("b", created_ago=0)])
    r = rec.Reconciler(store, Client(), interval=1)  # type: ignore[arg-type]
    assert r.grace == 2
    assert await r.reconcile_once() == 1
    assert calls == [("ensure", "a")]


async def test_an_object_without_a_readable_timestamp_is_ensured(
    calls: list[tuple[str, str]],
) -> None:
    broken = job("broken", created_ago=0)
    broken["metadata"]["creationTimestamp"] = "yesterday"
    missing = job("missing", created_ago=0)
    del missing["metadata"]["creationTimestamp"]
    r = rec.Reconciler(Store([broken, missing]), Client(), interval=30)  # type: ignore[arg-type]
    assert await r.reconcile_once() == 2
    assert sorted(calls) == [("ensure", "broken"), ("ensure", "missing")]


async def test_a_wake_runs_a_pass_at_once_that_ensures_new_objects_too(
    calls: list[tuple[str, str]],
) -> None:
    """Temporal is back after an outage: jobs created during it are ensured now, by a pass run
    at once (the interval is an hour) that skips the grace."""
    import asyncio

    store = Store([job("during-outage", created_ago=1)])
    r = rec.Reconciler(store, Client(), interval=3600)  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(r.run(stop))
    try:
        while r.woken_passes == 0 and not calls:  # the first pass leaves the new job alone
            r.wake()
            await asyncio.sleep(0.01)
        async with asyncio.timeout(10):
            while not calls:
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await task
    assert calls[0] == ("ensure", "during-outage")


async def test_the_temporal_watch_calls_back_when_temporal_answers_again() -> None:
    from skyshift.workers.temporal_watch import TemporalWatch

    answers = [True, False, False, True, True, False, True]

    class Service:
        async def check_health(self, **_: Any) -> bool:
            ok = answers.pop(0)
            if not ok:
                raise RuntimeError("Failed client connect: connection refused")
            return True

    class Healthy:
        service_client = Service()

    back: list[int] = []
    watch = TemporalWatch(Healthy(), lambda: back.append(len(answers)))  # type: ignore[arg-type]
    for _ in range(7):
        await watch.check()
    assert back == [3, 0]  # after the 4th and the 7th answer: each return once
    assert watch.returns == 2
