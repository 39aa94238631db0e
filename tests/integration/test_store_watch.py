"""ObjectStore.watch on a real etcd: order, exactly-once, selectors, compaction, restarts."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from skyshift.store import Expired, ObjectStore, Unavailable, WatchEvent
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration


def obj(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": name, "namespace": namespace, "labels": labels}}


async def take(events: AsyncIterator[WatchEvent], n: int, timeout: float = 10) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with asyncio.timeout(timeout):
        async for ev in events:
            out.append(ev)
            if len(out) == n:
                break
    return out


async def nothing_more(events: AsyncIterator[WatchEvent], wait: float = 0.3) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(wait):
            ev = await anext(events)
            pytest.fail(f"unexpected event {ev}")


def summary(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]


async def test_watch_from_revision_replays_missed_events_in_order(store: ObjectStore) -> None:
    start = await store.revision()
    a = await store.create("jobs", obj("a"))
    a2 = await store.update("jobs", {**a, "spec": {"n": 2}})
    await store.create("jobs", obj("b"))
    gone = await store.delete("jobs", "a", "default")

    events = store.watch("jobs", from_revision=str(start))
    got = await take(events, 4)
    assert summary(got) == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert [e.revision for e in got] == sorted(e.revision for e in got)
    assert got[1].object == a2
    # DELETED carries the last state, at the delete revision
    assert got[3].object["spec"] == {"n": 2}
    assert got[3].object["metadata"]["resourceVersion"] == gone["metadata"]["resourceVersion"]
    assert got[3].revision == int(gone["metadata"]["resourceVersion"])
    for e in got:
        assert e.object["metadata"]["resourceVersion"] == str(e.revision)

    # then live events, and nothing repeated
    await store.create("jobs", obj("c"))
    assert summary(await take(events, 1)) == [("ADDED", "c")]
    await nothing_more(events)
    await events.aclose()


async def test_watch_from_an_events_revision_starts_after_it(store: ObjectStore) -> None:
    a = await store.create("jobs", obj("a"))
    await store.create("jobs", obj("b"))
    events = store.watch("jobs", from_revision=a["metadata"]["resourceVersion"])
    assert summary(await take(events, 1)) == [("ADDED", "b")]
    await nothing_more(events)
    await events.aclose()


async def test_watch_without_revision_sees_only_new_changes(store: ObjectStore) -> None:
    await store.create("jobs", obj("old"))
    events = store.watch("jobs")
    pending = asyncio.ensure_future(take(events, 1))
    await asyncio.sleep(0.2)  # let the watch start
    await store.create("jobs", obj("new"))
    assert summary(await pending) == [("ADDED", "new")]
    await events.aclose()


async def test_watch_scopes(store: ObjectStore) -> None:
    start = await store.revision()
    await store.create("jobs", obj("x", "a"))
    await store.create("jobs", obj("y", "a"))
    await store.create("jobs", obj("x", "b"))
    await store.create("services", obj("x", "a"))
    await store.create("jobs", obj("z", "a"))

    by_name = store.watch("jobs", "a", name="x", from_revision=start)
    assert summary(await take(by_name, 1)) == [("ADDED", "x")]
    await nothing_more(by_name)

    in_ns = store.watch("jobs", "a", from_revision=start)
    assert summary(await take(in_ns, 3)) == [("ADDED", "x"), ("ADDED", "y"), ("ADDED", "z")]
    await nothing_more(in_ns)

    all_ns = store.watch("jobs", from_revision=start)
    got = await take(all_ns, 4)
    assert [e.object["metadata"]["namespace"] for e in got] == ["a", "a", "b", "a"]
    for it in (by_name, in_ns, all_ns):
        await it.aclose()


async def test_watch_with_selector_reports_entering_and_leaving(store: ObjectStore) -> None:
    start = await store.revision()
    a = await store.create("jobs", obj("a", app="web"))
    await store.create("jobs", obj("b", app="db"))
    a = await store.update("jobs", {**a, "spec": {"n": 1}})  # still web
    a = await store.update("jobs", {**a, "metadata": {**a["metadata"], "labels": {"app": "db"}}})
    a = await store.update("jobs", {**a, "metadata": {**a["metadata"], "labels": {"app": "web"}}})
    await store.delete("jobs", "b", "default")  # never matched: invisible
    await store.delete("jobs", "a", "default")

    events = store.watch("jobs", "default", from_revision=start, label_selector="app=web")
    got = await take(events, 5)
    assert summary(got) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),  # left the selector
        ("ADDED", "a"),  # came back
        ("DELETED", "a"),
    ]
    await nothing_more(events)
    await events.aclose()


async def test_watch_from_compacted_revision_expires(store: ObjectStore) -> None:
    start = await store.revision()
    a = await store.create("jobs", obj("a"))
    await store.update("jobs", a)
    now = await store.revision()
    await store.compact(now)
    await store.compact(now)  # compacting twice is harmless
    with pytest.raises(Expired) as info:
        await take(store.watch("jobs", from_revision=start), 1)
    assert info.value.compact_revision == now
    assert f"revision {start} was compacted (oldest available {now})" in str(info.value)
    assert "list again and watch from its resourceVersion" in str(info.value)
    # the list's resourceVersion is a valid place to resume from
    listed = await store.list("jobs")
    events = store.watch("jobs", from_revision=listed.resource_version)
    await store.delete("jobs", "a", "default")
    assert summary(await take(events, 1)) == [("DELETED", "a")]
    await events.aclose()


async def test_cancelling_the_consumer_leaks_nothing(etcd_server: EtcdServer) -> None:
    before = asyncio.all_tasks()
    s = ObjectStore(etcd_server.endpoint, prefix=f"/t-{uuid.uuid4().hex[:8]}")
    await s.connect()
    seen: list[WatchEvent] = []

    async def consume() -> None:
        async for ev in s.watch("jobs"):
            seen.append(ev)

    consumers = [asyncio.create_task(consume()) for _ in range(3)]
    await asyncio.sleep(0.2)
    await s.create("jobs", obj("a"))
    async with asyncio.timeout(5):
        while len(seen) < 3:
            await asyncio.sleep(0.02)
    for t in consumers:
        t.cancel()
    done, _ = await asyncio.wait(consumers, timeout=2)
    assert len(done) == 3 and all(t.cancelled() for t in consumers)
    await s.close()
    await asyncio.sleep(0.05)
    leftover = [t for t in asyncio.all_tasks() - before if not t.done()]
    assert leftover == []


async def test_closing_the_store_ends_watches(etcd_server: EtcdServer) -> None:
    s = ObjectStore(etcd_server.endpoint, prefix=f"/t-{uuid.uuid4().hex[:8]}")
    await s.connect()
    events = s.watch("jobs")
    pending = asyncio.ensure_future(take(events, 1))
    await asyncio.sleep(0.2)
    await s.close()
    assert await asyncio.wait_for(pending, 5) == []


async def _writer_store(server: EtcdServer, prefix: str) -> ObjectStore:
    w = ObjectStore(server.endpoint, prefix=prefix, timeout=5)
    await w.connect()
    return w


async def test_watch_resumes_across_etcd_restart(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    server = etcd_factory()
    prefix = f"/t-{uuid.uuid4().hex[:8]}"
    watcher = ObjectStore(server.endpoint, prefix=prefix, timeout=5)
    writer = await _writer_store(server, prefix)
    seen: list[WatchEvent] = []
    start = await writer.revision()

    async def consume() -> None:
        async for ev in watcher.watch("jobs", from_revision=start):
            seen.append(ev)

    consumer = asyncio.create_task(consume())
    try:
        for i in range(3):
            await writer.create("jobs", obj(f"before{i}"))
        async with asyncio.timeout(5):
            while len(seen) < 3:
                await asyncio.sleep(0.02)

        server.stop()
        await asyncio.sleep(0.5)  # the watch notices and starts reconnecting
        server.start()
        # written right after the restart, possibly before the watch is back: must not be lost
        for i in range(3):
            await writer.create("jobs", obj(f"after{i}"))
        async with asyncio.timeout(15):
            while len(seen) < 6:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # and nothing repeated afterwards
        assert not consumer.done()
        assert summary(seen) == [("ADDED", f"before{i}") for i in range(3)] + [
            ("ADDED", f"after{i}") for i in range(3)
        ]
        assert len({e.revision for e in seen}) == 6
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
        await watcher.close()
        await writer.close()


async def test_watch_survives_kill_and_gives_up_when_etcd_stays_down(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    server = etcd_factory()
    prefix = f"/t-{uuid.uuid4().hex[:8]}"
    watcher = ObjectStore(server.endpoint, prefix=prefix, timeout=1)
    writer = await _writer_store(server, prefix)
    events = watcher.watch("jobs", from_revision=await writer.revision())
    await writer.create("jobs", obj("a"))
    assert summary(await take(events, 1)) == [("ADDED", "a")]
    await writer.close()

    server.kill()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Unavailable, match="gave up reconnecting"):
        await asyncio.wait_for(anext(events), 15)
    # timeout 1s x 3 attempts, plus the last attempt in flight
    assert 2.5 < loop.time() - started < 8
    await watcher.close()


async def test_watches_opened_while_etcd_stalls_each_see_only_their_own_range(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    """etcd answers watch creations late (a stalled process, a loaded machine): every watch must
    still get its own key range. aetcd's shared watch stream paired a late "created" answer with
    whichever watch was being opened next, so a watch on one namespace delivered another's."""
    server = etcd_factory()
    prefix = f"/t-{uuid.uuid4().hex[:8]}"
    watcher = ObjectStore(server.endpoint, prefix=prefix, timeout=0.5)
    writer = await _writer_store(server, prefix)
    await watcher.connect()
    start = await writer.revision()
    namespaces = [f"ns{i}" for i in range(6)]
    seen: dict[str, list[WatchEvent]] = {ns: [] for ns in namespaces}

    async def consume(ns: str) -> None:
        async for ev in watcher.watch("jobs", ns, from_revision=start):
            seen[ns].append(ev)

    assert server.proc is not None
    consumers: list[asyncio.Task[None]] = []
    server.proc.send_signal(signal.SIGSTOP)
    try:
        for ns in namespaces:  # opened one by one while etcd does not answer: creations time out
            consumers.append(asyncio.create_task(consume(ns)))
            await asyncio.sleep(0.3)
    finally:
        server.proc.send_signal(signal.SIGCONT)
    try:
        for ns in namespaces:
            await writer.create("jobs", obj(f"in-{ns}", ns))
        async with asyncio.timeout(15):
            while any(not seen[ns] for ns in namespaces):
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # anything misrouted arrives too
        for ns in namespaces:
            assert [(e.object["metadata"]["namespace"], *summary([e])[0]) for e in seen[ns]] == [
                (ns, "ADDED", f"in-{ns}")
            ]
    finally:
        for t in consumers:
            t.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        await watcher.close()
        await writer.close()
