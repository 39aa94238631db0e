"""The Temporal floor under a lifecycle benchmark: ``n`` minimal workflows on the same server.

bench/lifecycle.py measured that a job's lifecycle costs the Temporal server what a minimal
workflow of three no-op activities costs (83 against 85 CPU ms per workflow). Any design with one
durable workflow per job therefore needs, on the machine at hand, at least the time ``n`` minimal
workflows take before its jobs do anything else; the Slurm and Kubernetes benchmarks print that
time next to the straight submission's, so a ratio can be read against what is reachable at all.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio.worker import Worker

from bench.lifecycle import Minimal, noop
from skyshift.lifecycle.client import connect


async def temporal_floor(address: str, n: int, concurrency: int) -> float:
    """Seconds for ``n`` minimal workflows, started ``concurrency`` at a time, to complete, with
    their worker in this process."""
    client = await connect(address)
    queue = f"bench-floor-{uuid.uuid4().hex[:6]}"
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await client.start_workflow(Minimal.run, i, id=f"{queue}-{i}", task_queue=queue)

    async with Worker(client, task_queue=queue, workflows=[Minimal], activities=[noop]):
        t0 = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(n)))
        await asyncio.gather(*(client.get_workflow_handle(f"{queue}-{i}").result()
                               for i in range(n)))
        return time.monotonic() - t0
