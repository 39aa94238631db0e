"""Twenty concurrent clients against one API server process: no 5xx and no lost update.

Each client loops for ``SKYSHIFT_FAULT_SECONDS`` (default 60) over a mix of what users and
controllers do: increment a shared counter in an annotation with compare-and-swap (PUT carrying
``metadata.resourceVersion``, or a merge PATCH carrying it), create and delete jobs of its own,
list (whole and paginated) and open short watches. A 409 means "re-read and retry"; every
increment that was acknowledged must be in the final counters, and a watcher per namespace must
have seen every counter value exactly once, in order. Figures are printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.faults.conftest import (
    ApiProcess,
    ResumingWatcher,
    fault_seconds,
    job,
    status_table,
)
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration

CLIENTS = 20
NAMESPACES = ("fault-a", "fault-b", "fault-c")
COUNTERS = 3  # per namespace: 9 hot objects shared by all clients
KEY = "fault.skyshift.io/count"
MERGE = "application/merge-patch+json"
MAX_ROUNDS = 500  # CAS rounds one increment may take before the test calls it starvation


@dataclass
class Tally:
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    increments: Counter[tuple[str, str]] = field(default_factory=Counter)
    conflicts: int = 0
    requests: int = 0
    max_latency: float = 0.0
    watch_events: int = 0
    problems: list[str] = field(default_factory=list)

    async def send(self, c: httpx.AsyncClient, op: str, method: str, url: str,
                   **kw: Any) -> httpx.Response:
        t0 = time.monotonic()
        r = await c.request(method, url, **kw)
        self.max_latency = max(self.max_latency, time.monotonic() - t0)
        self.requests += 1
        self.statuses[(op, r.status_code)] += 1
        if r.status_code >= 500:
            self.problems.append(f"{op} {method} {url}: {r.status_code} {r.text[:200]}")
        return r


async def increment(c: httpx.AsyncClient, t: Tally, ns: str, name: str, use_patch: bool) -> None:
    """Read, add one, write with the read resourceVersion; on 409 read again."""
    url = f"/{ns}/jobs/{name}"
    for _ in range(MAX_ROUNDS):
        r = await t.send(c, "get", "GET", url)
        if r.status_code != 200:
            t.problems.append(f"get {url}: {r.status_code}")
            return
        obj = r.json()
        meta = obj["metadata"]
        value = int(meta["annotations"][KEY]) + 1
        if use_patch:
            patch = {"metadata": {"resourceVersion": meta["resourceVersion"],
                                  "annotations": {KEY: str(value)}}}
            r = await t.send(c, "patch", "PATCH", url, content=json.dumps(patch),
                             headers={"Content-Type": MERGE})
        else:
            meta["annotations"][KEY] = str(value)
            r = await t.send(c, "put", "PUT", url, json=obj)
        if r.status_code == 200:
            t.increments[(ns, name)] += 1
            return
        if r.status_code != 409:
            t.problems.append(f"increment {url}: {r.status_code} {r.text[:200]}")
            return
        t.conflicts += 1
    t.problems.append(f"increment {url}: still conflicting after {MAX_ROUNDS} rounds")


async def short_watch(c: httpx.AsyncClient, t: Tally, ns: str) -> None:
    """List, then watch from the list's revision for about a second: events come after it."""
    r = await t.send(c, "list", "GET", f"/{ns}/jobs", params={"limit": 1})
    if r.status_code != 200:
        return
    start = int(r.json()["metadata"]["resourceVersion"])
    params = {"watch": "true", "resourceVersion": str(start), "timeoutSeconds": "1"}
    t0 = time.monotonic()
    async with c.stream("GET", f"/{ns}/jobs", params=params) as resp:
        t.requests += 1
        t.statuses[("watch", resp.status_code)] += 1
        if resp.status_code != 200:
            t.problems.append(f"watch {ns}: {resp.status_code}")
            return
        last = start
        async for line in resp.aiter_lines():
            if not line.strip():
                continue
            ev = json.loads(line)
            rv = int(ev["object"]["metadata"]["resourceVersion"])
            if ev["type"] == "ERROR" or rv <= last:
                t.problems.append(f"watch {ns}: bad event after {last}: {line[:200]}")
            elif ev["object"]["metadata"].get("namespace") != ns:
                t.problems.append(f"watch {ns}: event of another namespace: {line[:200]}")
            last = rv
            t.watch_events += 1
    if time.monotonic() - t0 > 10:
        t.problems.append(f"watch {ns} with timeoutSeconds=1 took {time.monotonic() - t0:.1f}s")


async def client_loop(api: ApiProcess, cid: int, deadline: float, t: Tally) -> None:
    rng = random.Random(cid)
    mine: list[tuple[str, str]] = []
    seq = 0
    async with httpx.AsyncClient(base_url=api.url, timeout=30, headers=api.headers) as c:
        while time.monotonic() < deadline:
            ns = rng.choice(NAMESPACES)
            roll = rng.random()
            if roll < 0.30:
                await increment(c, t, ns, f"counter-{rng.randrange(COUNTERS)}", use_patch=False)
            elif roll < 0.55:
                await increment(c, t, ns, f"counter-{rng.randrange(COUNTERS)}", use_patch=True)
            elif roll < 0.70:
                seq += 1
                name = f"c{cid:02d}-{seq:05d}"
                r = await t.send(c, "create", "POST", f"/{ns}/jobs", json=job(name))
                if r.status_code == 201:
                    mine.append((ns, name))
                else:
                    t.problems.append(f"create {ns}/{name}: {r.status_code} {r.text[:200]}")
            elif roll < 0.80 and mine:
                dns, name = mine.pop(rng.randrange(len(mine)))
                r = await t.send(c, "delete", "DELETE", f"/{dns}/jobs/{name}")
                if r.status_code != 200:
                    t.problems.append(f"delete {dns}/{name}: {r.status_code} {r.text[:200]}")
            elif roll < 0.92:
                params = {"limit": "5"} if rng.random() < 0.5 else {}
                while True:
                    r = await t.send(c, "list", "GET", f"/{ns}/jobs", params=params)
                    token = r.json()["metadata"].get("continue") if r.status_code == 200 else None
                    if not token:
                        break
                    params = {"limit": "5", "continue": token}
            else:
                await short_watch(c, t, ns)


async def seed(api: ApiProcess) -> dict[str, str]:
    """Namespaces and zeroed counters; returns each namespace's revision after seeding."""
    revs: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=api.url, timeout=30, headers=api.headers) as c:
        for ns in NAMESPACES:
            r = await c.post("/namespaces", json={"kind": "Namespace", "metadata": {"name": ns}})
            assert r.status_code == 201, r.text
            for i in range(COUNTERS):
                r = await c.post(f"/{ns}/jobs", json=job(f"counter-{i}", **{KEY: "0"}))
                assert r.status_code == 201, r.text
            revs[ns] = (await c.get(f"/{ns}/jobs")).json()["metadata"]["resourceVersion"]
    return revs


async def test_twenty_clients_no_5xx_no_lost_update(
    etcd_server: EtcdServer, api_process: Callable[..., ApiProcess]
) -> None:
    seconds = fault_seconds()
    api = api_process(etcd_server.endpoint)
    revs = await seed(api)
    watchers = [ResumingWatcher(api.url, api.token, "jobs", ns, revs[ns], note_key=KEY)
                for ns in NAMESPACES]
    for w in watchers:
        w.start()
    t = Tally()
    t0 = time.monotonic()
    await asyncio.wait_for(
        asyncio.gather(*(client_loop(api, i, t0 + seconds, t) for i in range(CLIENTS))),
        seconds + 120,
    )
    elapsed = time.monotonic() - t0

    final: dict[tuple[str, str], int] = {}
    async with httpx.AsyncClient(base_url=api.url, timeout=30, headers=api.headers) as c:
        for ns in NAMESPACES:
            body = (await c.get(f"/{ns}/jobs")).json()
            for obj in body["items"]:
                if obj["metadata"]["name"].startswith("counter-"):
                    final[(ns, obj["metadata"]["name"])] = int(obj["metadata"]["annotations"][KEY])
            # The list's revision is etcd's (all namespaces): fence with a write of this one.
            r = await c.post(f"/{ns}/jobs", json=job("fence"))
            assert r.status_code == 201, r.text
            await next(w for w in watchers if w.namespace == ns).caught_up(
                int(r.json()["metadata"]["resourceVersion"])
            )
    for w in watchers:
        await w.stop()

    events_checked = 0
    duplicates = 0
    for w in watchers:
        rvs = [e.rv for e in w.events]
        duplicates += len(rvs) - len(set(rvs))
        assert rvs == sorted(rvs), f"{w.namespace}: events out of order"
        for i in range(COUNTERS):
            notes = [int(e.note or 0) for e in w.events if e.name == f"counter-{i}"]
            want = final[(w.namespace, f"counter-{i}")]
            assert notes == list(range(1, want + 1)), (
                f"{w.namespace}/counter-{i}: watcher saw {len(notes)} values, not 1..{want}"
            )
        events_checked += len(w.events)

    total_increments = sum(t.increments.values())
    five_xx = sum(n for (_, code), n in t.statuses.items() if code >= 500)
    print(f"\n[concurrent] {CLIENTS} clients x {elapsed:.1f}s: {t.requests} requests "
          f"({t.requests / elapsed:.0f}/s), max latency {t.max_latency * 1000:.0f} ms")
    print(status_table("[concurrent] op/status", t.statuses))
    print(f"[concurrent] increments acknowledged {total_increments}, sum of counters "
          f"{sum(final.values())}, 409 conflicts retried {t.conflicts}, 5xx {five_xx}")
    print(f"[concurrent] long-watch events checked {events_checked}, duplicates {duplicates}, "
          f"short-watch events {t.watch_events}")

    assert not t.problems, t.problems[:10]
    misrouted = [e for w in watchers for e in w.errors if e.startswith("event of namespace")]
    assert not misrouted, misrouted[:5]
    assert five_xx == 0
    assert duplicates == 0
    for key, n in t.increments.items():
        assert final[key] == n, f"{key}: {n} increments acknowledged, counter says {final[key]}"
    assert sum(final.values()) == total_increments
    assert not api.server_errors(), api.server_errors()[:5]
