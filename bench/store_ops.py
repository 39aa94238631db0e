"""Object store benchmark: what one ObjectStore gets out of a local etcd.

Figures for the performance budget: create/get/CAS-update throughput and latency at
a given concurrency, a contended guaranteed_update counter, full and paginated list times, and
watch delivery latency (write acknowledged -> event received). Starts its own etcd in a temp dir
(or uses ``--endpoint``); prints the figures and merges them into bench/results/latest.json.
Asserts nothing.

    python bench/store_ops.py [--objects 2000] [--concurrency 16] [--endpoint 127.0.0.1:2379]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._util import summary_ms, write_result
from skyshift.store import ObjectStore
from tests.fixtures.etcd import EtcdServer


def job(i: int) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": f"job-{i:06d}", "namespace": "bench", "labels": {"shard": str(i % 4)}},
        "spec": {"image": "busybox", "run": "sleep 1", "resources": {"cpus": 0.5}, "replicas": 1},
        "status": {"phase": "Pending"},
    }


@contextlib.contextmanager
def own_etcd() -> Iterator[str]:
    tmp = Path(tempfile.mkdtemp(prefix="skyshift-store-bench-"))
    server = EtcdServer(shutil.which("etcd") or "etcd", tmp / "data")
    server.start()
    try:
        yield server.endpoint
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def timed(n: int, concurrency: int, op: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    """Run op(0..n-1) with ``concurrency`` workers; latency summary plus ops/s."""
    samples: list[float] = []
    next_i = iter(range(n))

    async def worker() -> None:
        for i in next_i:
            t0 = time.perf_counter()
            await op(i)
            samples.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {**summary_ms(samples), "ops_per_s": round(n / elapsed, 1)}


async def run(endpoint: str, n: int, concurrency: int) -> dict[str, Any]:
    out: dict[str, Any] = {"objects": n, "concurrency": concurrency}
    async with ObjectStore(endpoint, prefix=f"/bench-{uuid.uuid4().hex[:8]}") as store:
        out["create"] = await timed(n, concurrency, lambda i: store.create("jobs", job(i)))
        out["get"] = await timed(
            n, concurrency, lambda i: store.get("jobs", f"job-{i:06d}", "bench")
        )

        async def cas_update(i: int) -> None:
            obj = await store.get("jobs", f"job-{i:06d}", "bench")
            obj["status"]["phase"] = "Running"
            await store.update("jobs", obj)

        out["get_then_cas_update"] = await timed(n, concurrency, cas_update)

        await store.create("counters", {"metadata": {"name": "c"}, "spec": {"n": 0}})

        def incr(obj: dict[str, Any]) -> dict[str, Any]:
            obj["spec"]["n"] += 1
            return obj

        out["contended_guaranteed_update"] = await timed(
            400, concurrency, lambda i: store.guaranteed_update("counters", "c", None, incr)
        )

        t0 = time.perf_counter()
        full = await store.list("jobs", "bench")
        out["list_all_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        t0 = time.perf_counter()
        pages, token = 0, None
        while True:
            page = await store.list("jobs", "bench", limit=500, continue_token=token)
            pages, token = pages + 1, page.continue_token
            if token is None:
                break
        out["list_paginated_500_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["list_pages"] = pages
        t0 = time.perf_counter()
        await store.list("jobs", "bench", label_selector="shard=1")
        out["list_selector_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["listed_items"] = len(full.items)
        out["watch_delivery"] = await watch_latency(store, 500)
    return out


async def watch_latency(store: ObjectStore, n: int) -> dict[str, float]:
    acked: dict[str, float] = {}
    samples: list[float] = []
    done = asyncio.Event()
    events = store.watch("watched")

    async def consume() -> None:
        async for ev in events:
            samples.append(time.perf_counter() - acked[ev.object["metadata"]["name"]])
            if len(samples) == n:
                done.set()
                return

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    for i in range(n):
        name = f"w{i}"
        acked[name] = time.perf_counter()
        await store.create("watched", {"metadata": {"name": name}})
    await asyncio.wait_for(done.wait(), 30)
    await consumer
    await events.aclose()
    return summary_ms(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--endpoint", help="use a running etcd instead of starting one")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        endpoint = args.endpoint or stack.enter_context(own_etcd())
        result = asyncio.run(run(endpoint, args.objects, args.concurrency))
    print(json.dumps(result, indent=2))
    print(f"written to {write_result('store_ops', result)}")


if __name__ == "__main__":
    main()
