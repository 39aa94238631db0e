"""Two control workers and two skylet managers: a burst with both, against one of each.

Prints figures and what it checked, asserts nothing. On a private stack (etcd, Temporal dev
server) it runs two phases of ``--burst`` jobs each, spread over two local clusters:

A. one control worker and one skylet manager (it runs the skylets of every cluster);
B. a second control worker joins, and the manager is replaced by two, each assigned the clusters
   of its "host" by ``SKYSHIFT_SKYLET_SELECTOR`` (``bench-host=a`` / ``bench-host=b``).

For each phase: jobs/s from the first submission until all are Running, and the duplicates
check: every job has exactly one replica, on the cluster its placement names, and each cluster's
task queue is polled only by the manager assigned to it (the pollers' process ids, from
Temporal), so a second host never runs the first one's local replicas.

Usage: ``python bench/two_workers.py`` (about four minutes on 2 cores; ``--burst 200`` quicker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import write_result
from bench.lifecycle import NS, Bench, stop_replicas
from skyshift.config import Settings
from skyshift.contract.jobs import uid8
from skyshift.contract.names import skylet_queue
from skyshift.store import ObjectStore


class Stack:
    """etcd + Temporal, and worker processes started and stopped by name."""

    def __init__(self, tmp: Path) -> None:
        from tests.fixtures.etcd import EtcdServer
        from tests.fixtures.temporal import DevServer

        self.tmp = tmp
        self.etcd = EtcdServer("/usr/bin/etcd", tmp / "etcd")
        self.etcd.start()
        self.temporal = DevServer("temporal", tmp)
        self.temporal.start()
        self.env = {**os.environ, "SKYSHIFT_ETCD": self.etcd.endpoint,
                    "SKYSHIFT_TEMPORAL_ADDRESS": self.temporal.address,
                    "SKYSHIFT_STORE_PREFIX": "/bench2", "SKYSHIFT_LOG_LEVEL": "WARNING",
                    "SKYSHIFT_LOST_AFTER": "10", "SKYSHIFT_SYNC_INTERVAL": "1"}
        os.environ.update(self.env)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, module: str, **env: str) -> int:
        home = self.tmp / f"home-{name}"  # its own ready file
        ready = home / "run" / f"{module}.ready"
        log = (self.tmp / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", f"skyshift.workers.{module}"],
            env={**self.env, "SKYSHIFT_HOME": str(home), **env}, stdout=log, stderr=log)
        self.procs[name] = proc
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError((self.tmp / f"{name}.log").read_text()[-2000:])
            time.sleep(0.1)
        return proc.pid

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.terminate()
        proc.wait(30)

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        self.temporal.stop()
        self.etcd.stop()


async def pollers(client: Client, queue: str, since: float) -> set[int]:
    """Process ids that polled ``queue`` for activities after ``since`` (epoch seconds;
    Temporal remembers pollers for minutes after they stop; identities are ``<pid>@<host>``)."""
    resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
    return {int(p.identity.split("@", 1)[0]) for p in resp.pollers
            if p.identity.split("@", 1)[0].isdigit()
            and p.last_access_time.ToSeconds() >= since}


async def duplicates(bench: Bench, names: list[str], clusters: list[str]) -> list[str]:
    """What is wrong: a job without exactly one replica, or not where its placement says."""
    problems: list[str] = []
    dirs = {c: {p.name for p in (bench.tmp / c / "replicas").iterdir()} for c in clusters}
    for name in names:
        job = await bench.store.get("jobs", name, NS)
        placed = (job.get("status") or {}).get("placement") or {}
        prefix = f"{name}-{uid8(job['metadata']['uid'])}-"
        found = {c: sum(1 for d in dirs[c] if d.startswith(prefix)) for c in clusters}
        if sum(found.values()) != 1 or {c for c, n in found.items() if n} != set(placed):
            problems.append(f"{name}: placement {placed}, replicas {found}")
    return problems


async def phase(bench: Bench, label: str, n: int, clusters: list[str],
                owners: dict[str, set[int]]) -> dict[str, Any]:
    names = [f"{label.lower()}-{i}" for i in range(n)]
    sem = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with sem:
            await bench.submit(name, "sleep 600", only={"bench-phase": label})

    since, t0 = time.time(), time.monotonic()
    await asyncio.gather(*(one(nm) for nm in names))
    await bench.wait_running(names, 900)
    took = max(bench.running_at[nm] for nm in names) - t0
    await asyncio.sleep(3)  # let late duplicates show, were there any
    problems = await duplicates(bench, names, clusters)
    polled = {c: await pollers(bench.client, skylet_queue(c), since) for c in clusters}
    strays: dict[str, Any] = {c: sorted(p - owners[c]) for c, p in polled.items()
                              if p - owners[c]}
    strays.update({c: "no poller seen" for c, p in polled.items() if not p})
    spread = {c: len([d for d in (bench.tmp / c / "replicas").iterdir()]) for c in clusters}
    out = {"jobs": n, "all_running_s": round(took, 1), "jobs_per_s": round(n / took, 2),
           "replicas_per_cluster": spread, "duplicates_or_misplaced": len(problems),
           "queues_polled_by_others": strays}
    print(f"phase {label}: {n} jobs all Running after {took:.1f} s = {n / took:.1f} jobs/s; "
          f"replicas per cluster {spread}; duplicates/misplaced: {len(problems)} "
          f"{problems[:3]}; queues polled by a manager not assigned to them: {strays or 'none'}")
    return out


async def main(args: argparse.Namespace, stack: Stack) -> None:
    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    client = await Client.connect(settings.temporal_address)
    bench = Bench(store, client, stack.tmp / "clusters")
    watcher = asyncio.create_task(bench.watch_running())
    results: dict[str, Any] = {"burst": args.burst}
    try:
        control0 = stack.start("control-0", "control")
        every = stack.start("manager-all", "skylet_manager")
        clusters = {"A": ["a1", "b1"], "B": ["a2", "b2"]}
        for ph, pair in clusters.items():
            for c in pair:
                await bench.cluster(c, 100_000, {"bench-host": c[0], "bench-phase": ph})
        results["A_one_of_each"] = await phase(
            bench, "A", args.burst, clusters["A"], {c: {every} for c in clusters["A"]})
        # phase B: a second control worker; two managers, one per host, replace the first
        control1 = stack.start("control-1", "control")
        host_a = stack.start("manager-a", "skylet_manager", SKYSHIFT_SKYLET_SELECTOR="bench-host=a")
        host_b = stack.start("manager-b", "skylet_manager", SKYSHIFT_SKYLET_SELECTOR="bench-host=b")
        stack.stop("manager-all")
        await asyncio.sleep(3)  # the old manager's pollers leave the queues
        owners = {"a2": {host_a}, "b2": {host_b}}
        results["B_two_of_each"] = await phase(bench, "B", args.burst, clusters["B"], owners)
        results["pids"] = {"control": [control0, control1], "manager_a": host_a,
                           "manager_b": host_b}
        a, b = results["A_one_of_each"]["jobs_per_s"], results["B_two_of_each"]["jobs_per_s"]
        results["B_over_A"] = round(b / a, 2)
        print(f"two of each / one of each: {b / a:.2f} (2 cores: the workers share them)")
    finally:
        watcher.cancel()
        print(f"wrote {write_result('two_workers', results)}")
        await stop_replicas(stack.tmp / "clusters")
        await store.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=500, help="jobs per phase")
    arguments = ap.parse_args()
    the_stack = Stack(Path(tempfile.mkdtemp(prefix="skyshift-bench2-")))
    try:
        asyncio.run(main(arguments, the_stack))
    finally:
        the_stack.close()
