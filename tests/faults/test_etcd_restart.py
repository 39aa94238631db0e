"""etcd stopped and restarted under load: 503 while it is away, nothing lost or repeated after.

An API server process runs on a private etcd. Writers create and patch jobs and two watchers
follow the namespace: one keeps its stream open through the outage, the other hangs up when etcd
goes away and, like ``skyctl get -w``, keeps reconnecting with the last resourceVersion it saw.
While etcd is down every answer must be a 503 (never a 500) within the store timeout plus a
margin; after the restart writes must succeed again, and both watchers must have received every
acknowledged write exactly once, in order. Writes whose answer was a 503 have an unknown outcome
(the transaction may have committed just before the connection dropped), so an event for one of
those is allowed; anything else extra, missing or repeated fails the test.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest

from tests.faults.conftest import (
    ApiProcess,
    ResumingWatcher,
    Seen,
    assert_exact_sequence,
    job,
    status_table,
)
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration

WRITERS = 4
NS = "default"
OUTAGE = 8.0  # longer than the store timeout (5 s), so requests really fail during it
STORE_TIMEOUT = 5.0  # the ObjectStore default the API server process uses
MARGIN = 5.0  # scheduling slack on a shared 2-core machine


@dataclass
class Writes:
    acked: list[Seen] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    outage_statuses: Counter[int] = field(default_factory=Counter)
    max_latency: float = 0.0
    problems: list[str] = field(default_factory=list)
    first_ok_after: dict[str, float] = field(default_factory=dict)
    phase: str = "before"


async def writer(api: ApiProcess, wid: int, stop: asyncio.Event, w: Writes) -> None:
    seq = 0
    async with httpx.AsyncClient(base_url=api.url, timeout=STORE_TIMEOUT * 3,
                                 headers=api.headers) as c:
        while not stop.is_set():
            seq += 1
            name = f"w{wid}-{seq:05d}"
            phase = w.phase
            for op in ("create", "patch"):
                t0 = time.monotonic()
                try:
                    if op == "create":
                        r = await c.post(f"/{NS}/jobs", json=job(name))
                    else:
                        patch = {"metadata": {"labels": {"touched": "yes"}}}
                        r = await c.patch(f"/{NS}/jobs/{name}", content=json.dumps(patch),
                                          headers={"Content-Type": "application/merge-patch+json"})
                except httpx.TimeoutException:
                    w.problems.append(f"{op} {name}: no answer within {STORE_TIMEOUT * 3}s")
                    w.unknown.add(name)
                    break
                latency = time.monotonic() - t0
                w.max_latency = max(w.max_latency, latency)
                w.statuses[(op, r.status_code)] += 1
                if phase == "outage":
                    w.outage_statuses[r.status_code] += 1
                    if latency > STORE_TIMEOUT + MARGIN:
                        w.problems.append(f"{op} {name} took {latency:.1f}s during the outage")
                if r.status_code in (200, 201):
                    kind = "ADDED" if op == "create" else "MODIFIED"
                    rv = int(r.json()["metadata"]["resourceVersion"])
                    w.acked.append(Seen(kind, name, rv))
                    if w.phase not in w.first_ok_after:
                        w.first_ok_after[w.phase] = time.monotonic()
                    continue
                if r.status_code == 503:
                    w.unknown.add(name)  # may or may not have been committed
                elif not (r.status_code == 404 and name in w.unknown):
                    w.problems.append(f"{op} {name}: {r.status_code} {r.text[:200]}")
                break
            await asyncio.sleep(0.02)


async def test_etcd_restart_503_then_recovery_without_lost_events(
    etcd_factory: Callable[[], EtcdServer], api_process: Callable[..., ApiProcess]
) -> None:
    etcd = etcd_factory()
    api = api_process(etcd.endpoint)
    async with httpx.AsyncClient(base_url=api.url, headers=api.headers) as c:
        start_rv = (await c.get(f"/{NS}/jobs")).json()["metadata"]["resourceVersion"]
    steady = ResumingWatcher(api.url, api.token, "jobs", NS, start_rv).start()
    hangup = ResumingWatcher(api.url, api.token, "jobs", NS, start_rv).start()
    w = Writes()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(writer(api, i, stop, w)) for i in range(WRITERS)]

    await asyncio.sleep(3)
    deadline = time.monotonic() + 30  # a loaded machine (parallel test workers) starts slowly
    while not w.acked and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert w.acked, f"no write succeeded before the outage: {w.problems[:3]}"
    w.phase = "outage"
    outage_begin = time.monotonic()
    etcd.stop()
    # The second watcher hangs up now and reconnects (503s) until etcd is back.
    await hangup.stop()
    hangup.stopped.clear()
    hangup.start()
    await asyncio.sleep(OUTAGE)
    async with httpx.AsyncClient(base_url=api.url, headers=api.headers) as c:
        t0 = time.monotonic()
        r = await c.get("/readyz", timeout=STORE_TIMEOUT * 3)
        probe_s = time.monotonic() - t0
    assert r.status_code == 503 and "etcd" in r.text, r.text

    w.phase = "after"
    restart_begin = time.monotonic()
    etcd.start()
    etcd_up = time.monotonic()
    for watcher in (steady, hangup):
        watcher.mark("restart")
    deadline = time.monotonic() + 30
    while "after" not in w.first_ok_after and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert "after" in w.first_ok_after, f"no write succeeded after the restart: {w.problems[:5]}"
    await asyncio.sleep(3)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), STORE_TIMEOUT * 4)

    last = max(s.rv for s in w.acked)
    for watcher in (steady, hangup):
        await watcher.caught_up(last)
        await watcher.stop()

    acked = sorted(w.acked, key=lambda s: s.rv)
    checked = 0
    for watcher in (steady, hangup):
        n, dupes = assert_exact_sequence(watcher.events, acked, w.unknown)
        assert dupes == 0
        checked += n
    recovery = w.first_ok_after["after"] - etcd_up
    resume = {
        name: watcher.first_event_after["restart"] - etcd_up
        for name, watcher in (("steady", steady), ("hangup", hangup))
    }
    outage_5xx = {k: v for k, v in w.outage_statuses.items() if k >= 500}
    print(f"\n[etcd-restart] outage {restart_begin - outage_begin:.1f}s; answers during it: "
          f"{dict(w.outage_statuses)}; /readyz said 503 in {probe_s:.1f}s; "
          f"max request latency {w.max_latency:.1f}s")
    print(f"[etcd-restart] etcd healthy {etcd_up - restart_begin:.2f}s after start; first "
          f"acknowledged write {recovery:.2f}s after that; watchers' first event after "
          f"{resume['steady']:.2f}s (stream kept) / {resume['hangup']:.2f}s (reconnected)")
    print(status_table("[etcd-restart] op/status", w.statuses))
    print(f"[etcd-restart] acknowledged writes {len(acked)}, outcome unknown {len(w.unknown)}, "
          f"events checked {checked}, duplicates 0, hangup watcher reconnects "
          f"{hangup.reconnects} ({dict(hangup.statuses)})")

    assert not w.problems, w.problems[:10]
    assert set(outage_5xx) <= {503}, f"outage answers other than 503: {w.outage_statuses}"
    assert sum(outage_5xx.values()) > 0, "no request failed during the outage?"
    assert all(code < 500 or code == 503 for _, code in w.statuses), w.statuses
    for watcher in (steady, hangup):
        assert set(watcher.statuses) <= {0, 200, 503}, watcher.errors[:5]
    assert not api.server_errors(), api.server_errors()[:5]
