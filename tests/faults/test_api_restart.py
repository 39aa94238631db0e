"""The API server restarted while clients watch: every event arrives exactly once.

Two API server processes serve one etcd prefix (the server is stateless; production runs
replicas). A writer creates, patches and deletes jobs through replica B at a steady pace; three
watchers follow the namespace through replica A, which is restarted twice: gracefully (SIGTERM,
uvicorn closes the streams) and with ``kill -9`` (connections cut). The watchers are what
``skyctl get -w`` is: the real client, resuming with the resourceVersion of the last event seen.
Every write acknowledged by B must reach every watcher exactly once, in order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import pytest

from tests.faults.conftest import (
    ApiProcess,
    ResumingWatcher,
    Seen,
    assert_exact_sequence,
    job,
)
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration

NS = "default"
WATCHERS = 3


async def writer(
    api: ApiProcess, stop: asyncio.Event, acked: list[Seen], problems: list[str]
) -> None:
    """create, patch, delete in turn, ~30 writes/s; records what B acknowledged."""
    seq = 0
    async with httpx.AsyncClient(base_url=api.url, timeout=15, headers=api.headers) as c:
        while not stop.is_set():
            seq += 1
            name = f"r-{seq:05d}"
            patch = {"metadata": {"annotations": {"seq": str(seq)}}}
            steps: list[tuple[str, str, str, dict[str, object]]] = [
                ("ADDED", "POST", f"/{NS}/jobs", {"json": job(name)}),
                ("MODIFIED", "PATCH", f"/{NS}/jobs/{name}", {
                    "content": json.dumps(patch),
                    "headers": {"Content-Type": "application/merge-patch+json"},
                }),
            ]
            if seq % 3 == 0:
                steps.append(("DELETED", "DELETE", f"/{NS}/jobs/{name}", {}))
            for kind, method, path, kw in steps:
                r = await c.request(method, path, **kw)  # type: ignore[arg-type]
                if r.status_code not in (200, 201):
                    problems.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
                    return
                acked.append(Seen(kind, name, int(r.json()["metadata"]["resourceVersion"])))
                await asyncio.sleep(0.03)


async def restart(api: ApiProcess, watchers: list[ResumingWatcher], how: str) -> dict[str, float]:
    """Stop ``api`` (``term`` or ``kill``), start it on the same port; figures of the outage."""
    t0 = time.monotonic()
    if how == "kill":
        api.kill()
    else:
        await asyncio.to_thread(api.stop)
    stopped = time.monotonic()
    await asyncio.sleep(1.0)  # the watchers find it down and keep retrying meanwhile
    await asyncio.to_thread(api.start)
    ready = time.monotonic()
    for w in watchers:
        w.mark(how)
    deadline = time.monotonic() + 30
    while not all(how in w.first_event_after for w in watchers):
        assert time.monotonic() < deadline, f"watchers did not resume after {how}"
        await asyncio.sleep(0.01)
    resumed = max(w.first_event_after[how] for w in watchers)
    return {
        "stop_s": stopped - t0,
        "down_s": ready - t0,
        "ready_after_start_s": ready - stopped - 1.0,
        "all_watchers_resumed_after_ready_s": resumed - ready,
    }


async def test_api_restart_watchers_get_every_event_once(
    etcd_server: EtcdServer, api_process: Callable[..., ApiProcess]
) -> None:
    watched = api_process(etcd_server.endpoint)
    writes_via = api_process(etcd_server.endpoint, prefix=watched.prefix, home=watched.home)
    async with httpx.AsyncClient(base_url=watched.url, headers=watched.headers) as c:
        start_rv = (await c.get(f"/{NS}/jobs")).json()["metadata"]["resourceVersion"]
    watchers = [ResumingWatcher(watched.url, watched.token, "jobs", NS, start_rv).start()
                for _ in range(WATCHERS)]
    acked: list[Seen] = []
    problems: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(writer(writes_via, stop, acked, problems))

    await asyncio.sleep(2)
    figures = {"term": await restart(watched, watchers, "term")}
    await asyncio.sleep(2)
    figures["kill"] = await restart(watched, watchers, "kill")
    await asyncio.sleep(2)
    stop.set()
    await asyncio.wait_for(task, 30)
    assert not problems, problems[:5]

    last = max(s.rv for s in acked)
    checked = 0
    for w in watchers:
        await w.caught_up(last)
        await w.stop()
        n, dupes = assert_exact_sequence(w.events, sorted(acked, key=lambda s: s.rv))
        assert dupes == 0
        checked += n
    reconnects = sum(w.reconnects for w in watchers)
    print(f"\n[api-restart] writes acknowledged {len(acked)}; {WATCHERS} watchers: events checked "
          f"{checked}, duplicates 0, missing 0, reconnects {reconnects}")
    for how, f in figures.items():
        print(f"[api-restart] {how}: stopped in {f['stop_s']:.2f}s, new process ready in "
              f"{f['ready_after_start_s']:.2f}s, every watcher had its next event "
              f"{f['all_watchers_resumed_after_ready_s']:.2f}s after ready")
    for w in watchers:
        assert 500 not in w.statuses, w.errors[:5]
    assert not watched.server_errors() and not writes_via.server_errors()
