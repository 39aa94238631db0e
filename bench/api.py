"""API benchmark: create/get/list/watch latency and throughput with 1,000 and 10,000 jobs stored.

Starts its own etcd and API server (the embedded stack's processes, with lifecycle hooks off so
10,000 stored jobs do not start 10,000 workflows: that cost is measured by bench/lifecycle.py), or
uses ``--server URL`` for a running stack. Prints figures and writes them to
bench/results/latest.json; asserts nothing.

    python bench/api.py [--sizes 1000,10000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._authed import api_stack
from bench._util import summary_ms, write_result

NS = "bench"


def job(name: str) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"bench": "api", "shard": name[-1]}},
        "spec": {"run": "sleep 1", "resources": {"cpus": 0.1}, "replicas": 0},
    }


@contextlib.contextmanager
def own_stack() -> Iterator[str]:
    """etcd + API server on free ports in a temp dir (bench/_authed.py); yields the API URL and
    exports the admin's token as SKYSHIFT_TOKEN, which run() sends."""
    # the server's own log level (INFO unless told): the figures include its access log
    with api_stack(log_level=os.environ.get("SKYSHIFT_LOG_LEVEL", "INFO")) as (url, token):
        os.environ["SKYSHIFT_TOKEN"] = token
        yield url


async def timed(fn: Any, *args: Any, **kw: Any) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    r = await fn(*args, **kw)
    return time.perf_counter() - t0, r


async def fill(c: httpx.AsyncClient, start: int, stop: int, conc: int) -> dict[str, Any]:
    """Create jobs [start, stop) with `conc` concurrent clients; latency and requests/s."""
    lat: list[float] = []
    queue = iter(range(start, stop))

    async def worker() -> None:
        for i in queue:
            dt, r = await timed(c.post, f"/{NS}/jobs", json=job(f"job-{i:06d}"))
            if r.status_code not in (200, 201):
                raise RuntimeError(f"create failed: {r.status_code} {r.text[:200]}")
            lat.append(dt)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall = time.perf_counter() - t0
    return {**summary_ms(lat), "rps": round(len(lat) / wall, 1), "concurrency": conc}


async def gets(c: httpx.AsyncClient, n: int, size: int, conc: int) -> dict[str, Any]:
    lat: list[float] = []
    names = [f"job-{random.randrange(size):06d}" for _ in range(n)]
    it = iter(names)

    async def worker() -> None:
        for name in it:
            dt, r = await timed(c.get, f"/{NS}/jobs/{name}")
            r.raise_for_status()
            lat.append(dt)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall = time.perf_counter() - t0
    return {**summary_ms(lat), "rps": round(n / wall, 1), "concurrency": conc}


async def lists(c: httpx.AsyncClient, size: int, rounds: int) -> dict[str, Any]:
    full: list[float] = []
    page: list[float] = []
    sel: list[float] = []
    for _ in range(rounds):
        dt, r = await timed(c.get, f"/{NS}/jobs")
        r.raise_for_status()
        assert len(r.json()["items"]) == size
        full.append(dt)
        dt, r = await timed(c.get, f"/{NS}/jobs", params={"limit": 500})
        r.raise_for_status()
        page.append(dt)
        dt, r = await timed(c.get, f"/{NS}/jobs", params={"labelSelector": "shard=7"})
        r.raise_for_status()
        sel.append(dt)
    return {"full": summary_ms(full), "page_500": summary_ms(page), "selector": summary_ms(sel)}


async def watch_latency(c: httpx.AsyncClient, size: int, n: int) -> dict[str, Any]:
    """Time from a PATCH being sent to its MODIFIED event arriving on an open watch."""
    r = await c.get(f"/{NS}/jobs", params={"limit": 1})
    rv = r.json()["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    lat: list[float] = []
    got_all = asyncio.Event()

    async def reader(lines: AsyncIterator[str]) -> None:
        async for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            obj = ev.get("object", {})
            mark = obj.get("metadata", {}).get("annotations", {}).get("bench/mark")
            if ev.get("type") == "MODIFIED" and mark in sent:
                lat.append(time.perf_counter() - sent.pop(mark))
                if len(lat) >= n:
                    got_all.set()
                    return

    async with c.stream("GET", f"/{NS}/jobs",
                        params={"watch": "true", "resourceVersion": rv}, timeout=None) as resp:
        task = asyncio.create_task(reader(resp.aiter_lines()))
        for i in range(n):
            name = f"job-{random.randrange(size):06d}"
            mark = f"m{i}"
            sent[mark] = time.perf_counter()
            patch = {"metadata": {"annotations": {"bench/mark": mark}}}
            pr = await c.patch(f"/{NS}/jobs/{name}", content=json.dumps(patch),
                               headers={"Content-Type": "application/merge-patch+json"})
            pr.raise_for_status()
            while len(sent) > 8:  # keep a few in flight, like a busy controller
                await asyncio.sleep(0.001)
        await asyncio.wait_for(got_all.wait(), 60)
        task.cancel()
    return summary_ms(lat)


async def run(url: str, sizes: list[int], conc: int) -> dict[str, Any]:
    out: dict[str, Any] = {"server": url, "sizes": {}}
    limits = httpx.Limits(max_connections=conc * 2, max_keepalive_connections=conc * 2)
    token = os.environ.get("SKYSHIFT_TOKEN")  # --server: export a token (`skyctl login`)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits, headers=headers) as c:
        r = await c.post("/namespaces", json={"kind": "Namespace", "metadata": {"name": NS}})
        if r.status_code not in (200, 201, 409):
            raise SystemExit(f"cannot create namespace: {r.status_code} {r.text}")
        stored = 0
        for size in sizes:
            print(f"filling to {size} jobs ...", flush=True)
            create = await fill(c, stored, size, conc)
            stored = size
            res = {
                "create": create,
                "get_sequential": await gets(c, 500, size, 1),
                "get_concurrent": await gets(c, 2000, size, conc),
                "list": await lists(c, size, 5 if size >= 10_000 else 10),
                "watch_event_latency": await watch_latency(c, size, 200),
            }
            out["sizes"][str(size)] = res
            print_table(size, res)
    return out


def print_table(size: int, res: dict[str, Any]) -> None:
    print(f"\n== {size} jobs stored ==")
    print(f"{'operation':28} {'p50 ms':>9} {'p99 ms':>9} {'req/s':>9}")
    rows = [
        (f"create (conc {res['create']['concurrency']})", res["create"]),
        ("get (sequential)", res["get_sequential"]),
        (f"get (conc {res['get_concurrent']['concurrency']})", res["get_concurrent"]),
        (f"list all {size}", res["list"]["full"]),
        ("list limit=500", res["list"]["page_500"]),
        ("list labelSelector (1/10)", res["list"]["selector"]),
        ("watch: patch -> event", res["watch_event_latency"]),
    ]
    for name, r in rows:
        rps = r.get("rps", "")
        print(f"{name:28} {r['p50_ms']:>9} {r['p99_ms']:>9} {rps!s:>9}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server", help="use a running API server instead of starting one")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    random.seed(7)
    if args.server:
        result = asyncio.run(run(args.server, sizes, args.concurrency))
    else:
        with own_stack() as url:
            result = asyncio.run(run(url, sizes, args.concurrency))
    result["p50_note"] = "medians and p99 from one run; lifecycle hooks off (see docstring)"
    print(f"\nwrote {write_result('api', result)}")


if __name__ == "__main__":
    main()
