"""``?watch=true`` through a real uvicorn server and a real etcd.

Checks the chosen semantics: without resourceVersion the current objects come first as ADDED;
with one, exactly the later changes, so a client that resumes from the last revision it saw
misses nothing and sees nothing twice; compaction is 410; idle streams get keep-alives.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from skyshift.api import ApiOptions
from skyshift.api.watch import MAX_WATCH_TIMEOUT, PUMP_TASK
from skyshift.store import ObjectStore
from tests.fixtures.api import sample, uvicorn_server

# Until tests/conftest.py lists it: load the API fixtures for this module.
pytest_plugins = ["tests.fixtures.api"]
pytestmark = pytest.mark.integration

MERGE = {"Content-Type": "application/merge-patch+json"}


class Watch:
    """Reads a watch stream in the background; ``next()`` returns the next event."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.blank = 0
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for line in self.resp.aiter_lines():
                if line.strip():
                    await self.lines.put(line)
                else:
                    self.blank += 1
        finally:
            await self.lines.put(None)

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        line = await asyncio.wait_for(self.lines.get(), timeout)
        assert line is not None, "stream ended"
        event: dict[str, Any] = json.loads(line)
        return event

    async def take(self, n: int) -> list[dict[str, Any]]:
        return [await self.next() for _ in range(n)]

    async def ended(self, timeout: float = 10.0) -> bool:
        return await asyncio.wait_for(self.lines.get(), timeout) is None


@contextlib.asynccontextmanager
async def watching(c: httpx.AsyncClient, path: str, **params: Any) -> AsyncIterator[Watch]:
    async with c.stream("GET", path, params={"watch": "true", **params}, timeout=None) as resp:
        assert resp.status_code == 200, (await resp.aread()).decode()
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        w = Watch(resp)
        try:
            yield w
        finally:
            w.task.cancel()
            with contextlib.suppress(BaseException):
                await w.task


def brief(event: dict[str, Any]) -> tuple[str, str, str]:
    meta = event["object"]["metadata"]
    return event["type"], meta["name"], meta["resourceVersion"]


@pytest.fixture
async def client(api_server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api_server, timeout=10) as c:
        yield c


async def test_watch_sends_current_objects_then_changes(
    client: httpx.AsyncClient, store: ObjectStore
) -> None:
    c = client
    for name in ("a", "b"):
        assert (await c.post("/default/jobs", json=sample("jobs", name))).status_code == 201
    async with watching(c, "/default/jobs") as w:
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in await w.take(2)] == [
            ("ADDED", "a"),
            ("ADDED", "b"),
        ]
        await c.post("/default/jobs", json=sample("jobs", "c"))
        await c.patch(
            "/default/jobs/a", headers=MERGE, content=json.dumps({"spec": {"replicas": 3}})
        )
        r = await c.delete("/default/jobs/b")  # lifecycle: marked, not yet removed
        assert r.status_code == 202
        await store.delete("jobs", "b", "default")  # what the workflow does after teardown
        events = await w.take(4)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "c"),
            ("MODIFIED", "a"),
            ("MODIFIED", "b"),
            ("DELETED", "b"),
        ]
        assert events[1]["object"]["spec"]["replicas"] == 3
        assert events[2]["object"]["metadata"]["deletionTimestamp"]


async def test_resume_misses_and_repeats_nothing(client: httpx.AsyncClient) -> None:
    c = client
    start = (await c.get("/default/jobs")).json()["metadata"]["resourceVersion"]
    expected: list[tuple[str, str, str]] = []

    async def change(i: int) -> None:
        name = f"r{i % 3}"
        if i < 3:
            r = await c.post("/default/jobs", json=sample("jobs", name))
            kind = "ADDED"
        else:
            r = await c.patch(
                f"/default/jobs/{name}",
                headers=MERGE,
                content=json.dumps({"metadata": {"labels": {"i": str(i)}}}),
            )
            kind = "MODIFIED"
        assert r.status_code in (200, 201), r.text
        expected.append((kind, name, r.json()["metadata"]["resourceVersion"]))

    seen: list[tuple[str, str, str]] = []
    async with watching(c, "/default/jobs", resourceVersion=start) as w:
        for i in range(6):
            await change(i)
        seen += [brief(e) for e in await w.take(4)]
    for i in range(6, 9):  # while nobody watches
        await change(i)
    async with watching(c, "/default/jobs", resourceVersion=seen[-1][2]) as w:
        seen += [brief(e) for e in await w.take(5)]
        await change(9)
        seen.append(brief(await w.next()))
        with pytest.raises(TimeoutError):
            await w.next(timeout=0.5)
    assert seen == expected


async def test_watch_one_object_and_selectors(client: httpx.AsyncClient) -> None:
    c = client
    await c.post("/default/jobs", json=sample("jobs", "one", tier="a"))
    await c.post("/default/jobs", json=sample("jobs", "two", tier="b"))
    assert (await c.post("/namespaces", json=sample("namespaces", "other"))).status_code == 201
    async with (
        watching(c, "/default/jobs/one") as single,
        watching(c, "/jobs", labelSelector="tier=a") as selected,
    ):
        assert brief(await single.next())[:2] == ("ADDED", "one")
        assert brief(await selected.next())[:2] == ("ADDED", "one")
        await c.patch(
            "/default/jobs/two", headers=MERGE, content=json.dumps({"spec": {"replicas": 4}})
        )
        await c.post("/other/jobs", json=sample("jobs", "three", tier="a"))
        await c.patch(
            "/default/jobs/one", headers=MERGE, content=json.dumps({"spec": {"replicas": 5}})
        )
        assert brief(await single.next())[:2] == ("MODIFIED", "one")
        assert [brief(e)[:2] for e in await selected.take(2)] == [
            ("ADDED", "three"),
            ("MODIFIED", "one"),
        ]
        with pytest.raises(TimeoutError):
            await selected.next(timeout=0.3)


async def test_keepalive_bookmarks_and_timeout(client: httpx.AsyncClient) -> None:
    c = client
    created = (await c.post("/default/jobs", json=sample("jobs", "k"))).json()
    rv = created["metadata"]["resourceVersion"]
    async with watching(c, "/default/jobs", resourceVersion=rv, timeoutSeconds=2) as w:
        assert await w.ended(timeout=5)  # ends by itself after timeoutSeconds
        assert w.blank >= 2  # keep-alive every 0.5 s in this fixture
    async with watching(
        c, "/default/jobs", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=3
    ) as w:
        bookmark = await w.next(timeout=5)
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["resourceVersion"] == rv
        r = await c.patch(
            "/default/jobs/k",
            headers=MERGE,
            content=json.dumps({"metadata": {"labels": {"n": "1"}}}),
        )
        new_rv = r.json()["metadata"]["resourceVersion"]
        event = await w.next()
        while event["type"] == "BOOKMARK":
            event = await w.next()
        assert brief(event) == ("MODIFIED", "k", new_rv)
        event = await w.next()
        assert event["type"] == "BOOKMARK"
        assert event["object"]["metadata"]["resourceVersion"] == new_rv


async def test_bad_resource_version(client: httpx.AsyncClient) -> None:
    r = await client.get("/default/jobs", params={"watch": "true", "resourceVersion": "abc"})
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "resourceVersion"


async def test_compacted_revision_is_410(make_api: Any, etcd_factory: Any) -> None:
    server = etcd_factory()  # compaction is global to an etcd: use a private one
    store = ObjectStore(server.endpoint, prefix="/compact")
    await store.connect()
    try:
        async with (
            uvicorn_server(make_api(store_=store, options=ApiOptions())) as url,
            httpx.AsyncClient(base_url=url, timeout=10) as c,
        ):
            old = (await c.post("/default/jobs", json=sample("jobs", "old"))).json()
            for i in range(3):
                await c.patch(
                    "/default/jobs/old",
                    headers=MERGE,
                    content=json.dumps({"metadata": {"labels": {"i": str(i)}}}),
                )
            await store.compact(await store.revision())
            r = await c.get(
                "/default/jobs",
                params={"watch": "true", "resourceVersion": old["metadata"]["resourceVersion"]},
            )
            assert r.status_code == 410, r.text
            err = r.json()["error"]
            assert err["reason"] == "Expired" and "compacted" in err["message"]
            # Listing again gives a resourceVersion that can be watched from.
            rv = (await c.get("/default/jobs")).json()["metadata"]["resourceVersion"]
            async with watching(c, "/default/jobs", resourceVersion=rv) as w:
                await c.delete("/default/jobs/old")
                assert brief(await w.next())[:2] == ("DELETED", "old")
    finally:
        await store.close()


def pumps() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == PUMP_TASK and not t.done()]


async def test_disconnect_stops_the_etcd_watch(api_server: str) -> None:
    async with httpx.AsyncClient(base_url=api_server, timeout=10) as c:
        before = len(pumps())
        async with watching(c, "/default/jobs") as w:
            await c.post("/default/jobs", json=sample("jobs", "d"))
            assert brief(await w.next())[:2] == ("ADDED", "d")
            assert len(pumps()) == before + 1
    for _ in range(100):  # noticed at the latest on the next keep-alive (0.5 s here)
        if len(pumps()) == before:
            break
        await asyncio.sleep(0.05)
    assert len(pumps()) == before


async def _forged_continue(c: httpx.AsyncClient, rv: str) -> str:
    """A real continue token of /default/jobs with its revision replaced by ``rv``."""
    for name in ("p1", "p2"):
        await c.post("/default/jobs", json=sample("jobs", name))
    token = (await c.get("/default/jobs", params={"limit": "1"})).json()["metadata"]["continue"]
    key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["k"]
    raw = '{"k":' + json.dumps(key) + ',"rv":' + rv + "}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


# Revisions are etcd's int64: anything else a client sends is a 400 naming the parameter,
# never a 500 (an overflow) nor a 200 stream that ends in an error event.
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": "1", "continue": "1e400"}, "continue"),
        ({"limit": "1", "continue": "99999999999999999999999"}, "continue"),
        ({"limit": "1", "continue": str(2**63)}, "continue"),
        ({"watch": "true", "resourceVersion": "\u00b2"}, "resourceVersion"),
        ({"watch": "true", "resourceVersion": "99999999999999999999999"}, "resourceVersion"),
        ({"watch": "true", "resourceVersion": str(2**63)}, "resourceVersion"),
        ({"limit": "99999999999999999999999"}, "limit"),
        ({"watch": "true", "timeoutSeconds": "99999999999999999999999"}, "timeoutSeconds"),
        ({"watch": "true", "timeoutSeconds": str(MAX_WATCH_TIMEOUT + 1)}, "timeoutSeconds"),
    ],
)
async def test_out_of_range_numbers_are_400_naming_the_parameter(
    client: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    if "continue" in params:
        params = {**params, "continue": await _forged_continue(client, params["continue"])}
    r = await client.get("/default/jobs", params=params)
    assert r.status_code in (400, 422), r.text
    err = r.json()["error"]
    assert field in err["message"] or err.get("field") == field, err
    assert "Traceback" not in r.text
