"""Local adapter micro-benchmark: prints figures, asserts nothing.

Cost of the calls the skylet makes on a ``local`` cluster, with ``--finished`` finished and
``--running`` running replicas on it (1,000 + 100 by default): ``replicas()``, ``state()``, one
sync round (both), ``submit()`` of a new replica (includes launching its process) and of an
existing one (an idempotent retry: no process is started), a burst of ``--burst`` single-replica
submits 8 at a time (replicas started per second), and the first ``replicas()`` of a
fresh adapter instance on the same state directory (a restarted worker). Wall and CPU time per
call (CPU of this process, all threads), p50 and p99. The cluster lives in a temporary directory
and every replica is deleted at the end.

Usage: ``python bench/local_adapter.py [--finished N] [--running N] [--calls N] [--submits N]
[--burst N]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import pct, write_result
from skyshift.compat.local.adapter import LocalManager
from skyshift.compat.types import ReplicaSpec
from skyshift.models.quantity import Resources


def spec(job: str, uid: str, rank: int, run: str) -> ReplicaSpec:
    return ReplicaSpec(name=f"{job}-{uid[:8]}-{rank}", job_name=job, namespace="bench",
                       job_uid=uid, rank=rank, run=run,
                       resources=Resources(cpus=0.001, memory=1))


async def timed(label: str, n: int, call: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        await call(i)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    row = {"n": n, "p50_ms": round(pct(wall, 50) * 1000, 3),
           "p99_ms": round(pct(wall, 99) * 1000, 3),
           "cpu_p50_ms": round(pct(cpu, 50) * 1000, 3)}
    print(f"{label:<38} p50 {row['p50_ms']:9.3f} ms   p99 {row['p99_ms']:9.3f} ms   "
          f"cpu p50 {row['cpu_p50_ms']:9.3f} ms   (n={n})")
    return row


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="skyshift-local-bench-"))
    config = {"state_dir": str(tmp), "cpus": 1000, "memory": 10_000_000, "grace_period": 0.2}
    mgr = LocalManager("bench-local", config)
    await mgr.connect()
    done_uid, run_uid, new_uid = (uuid.uuid4().hex for _ in range(3))
    try:
        t0 = time.monotonic()
        finished = [spec("done", done_uid, r, "true") for r in range(args.finished)]
        for i in range(0, len(finished), 100):
            await mgr.submit(finished[i:i + 100])
        running = [spec("run", run_uid, r, "sleep 3600") for r in range(args.running)]
        for i in range(0, len(running), 50):
            await mgr.submit(running[i:i + 50])
        while True:  # every "true" has ended
            states = {r.state for r in await mgr.replicas() if r.job_uid == done_uid}
            if states <= {"Succeeded"}:
                break
            await asyncio.sleep(0.2)
        print(f"setup: {args.finished} finished + {args.running} running replicas "
              f"in {time.monotonic() - t0:.0f} s ({tmp})")
        rows: dict[str, Any] = {"finished": args.finished, "running": args.running}
        rows["replicas"] = await timed("replicas()", args.calls, lambda i: mgr.replicas())
        rows["state"] = await timed("state()", args.calls, lambda i: mgr.state())

        async def sync_round(i: int) -> None:
            await mgr.replicas()
            await mgr.state()

        rows["sync_round"] = await timed("sync round (replicas + state)", args.calls, sync_round)
        new = [spec("new", new_uid, r, "sleep 3600") for r in range(args.submits)]
        rows["submit_new"] = await timed("submit() new replica (launches it)", args.submits,
                                         lambda i: mgr.submit([new[i]]))
        burst = [spec("burst", new_uid[::-1], r, "sleep 3600") for r in range(args.burst)]
        sem = asyncio.Semaphore(8)

        async def one(s: ReplicaSpec) -> None:
            async with sem:
                await mgr.submit([s])

        t0 = time.perf_counter()
        await asyncio.gather(*(one(s) for s in burst))
        rate = args.burst / (time.perf_counter() - t0)
        rows["submit_burst"] = {"n": args.burst, "concurrency": 8, "per_s": round(rate, 1)}
        print(f"{'submit() x' + str(args.burst) + ', 8 at a time':<38} {rate:.1f} replicas/s")
        rows["submit_retry"] = await timed("submit() retry of an existing replica",
                                           args.calls, lambda i: mgr.submit([running[i % 50]]))
        rows["fresh_instance_replicas"] = await timed(
            "replicas() on a fresh instance", 5,
            lambda i: LocalManager("bench-local", config).replicas())
        write_result("local_adapter", rows)
    finally:
        for uid in (done_uid, run_uid, new_uid, new_uid[::-1]):
            await mgr.delete_job(uid)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--finished", type=int, default=1000)
    ap.add_argument("--running", type=int, default=100)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--submits", type=int, default=30)
    ap.add_argument("--burst", type=int, default=100)
    asyncio.run(main(ap.parse_args()))
