"""Lifecycle benchmark: prints figures, asserts nothing.

Measures, against a running stack (``SKYSHIFT_ETCD`` / ``SKYSHIFT_TEMPORAL_ADDRESS`` /
``SKYSHIFT_STORE_PREFIX``, control worker and skylet manager running), or against a private one
it spawns with ``--spawn`` (etcd, Temporal dev server with WAL, both workers as subprocesses):

1. submit -> Running latency, p50/p99 over ``--latency-jobs`` jobs submitted one at a time;
2. a burst of ``--burst`` jobs: jobs/s from the first submission until all are Running;
3. the ceiling: a minimal workflow with three no-op activities on the same server, workflows/s,
   and the ratio burst/ceiling (the performance budget: target >= 0.8);
4. idle cost: Temporal history events/s and etcd writes/s while ``--idle-small`` jobs run, then
   again while those and the burst's jobs run (the budget: it must not grow with running jobs);
5. failover: seconds from a cluster going unreachable until its job runs elsewhere.

Usage: ``python bench/lifecycle.py --spawn`` (about five minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import cpu_seconds, per_item_ms, write_result
from skyshift.config import Settings
from skyshift.lifecycle import starter
from skyshift.lifecycle.client import connect
from skyshift.models.meta import now_iso
from skyshift.store import ObjectStore

NS = "bench"


@activity.defn(name="bench_noop")
async def noop(x: int) -> int:
    return x


@workflow.defn(name="BenchMinimal", sandboxed=False)  # re-importing this script is not worth it
class Minimal:
    @workflow.run
    async def run(self, x: int) -> int:
        for _ in range(3):
            x = await workflow.execute_activity(
                "bench_noop", x, start_to_close_timeout=timedelta(seconds=30)
            )
        return x


class CpuMeter:
    """CPU seconds spent by each process of the stack over a phase: what a job costs the machine
    whatever else runs on it (wall-clock rates on a shared 2-core machine are not that)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = {**pids, "bench": os.getpid()}
        self.t0: dict[str, float] = {}

    def start(self) -> None:
        self.t0 = {k: cpu_seconds(p) for k, p in self.pids.items()}

    def per_item_ms(self, n: int) -> dict[str, float]:
        used = {k: cpu_seconds(p) - self.t0.get(k, 0.0) for k, p in self.pids.items()}
        return per_item_ms(used, n, digits=2)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Bench:
    def __init__(self, store: ObjectStore, client: Client, tmp: Path,
                 pids: dict[str, int] | None = None) -> None:
        self.store, self.client, self.tmp = store, client, tmp
        self.cpu = CpuMeter(pids or {})
        self.running_at: dict[str, float] = {}
        self.results: dict[str, Any] = {}  # what write_result("lifecycle", ...) records

    async def watch_running(self) -> None:
        rev = (await self.store.list("jobs", NS, limit=1)).resource_version
        async for ev in self.store.watch("jobs", NS, from_revision=rev):
            name = ev.object["metadata"]["name"]
            phase = (ev.object.get("status") or {}).get("phase")
            if phase in ("Running", "Succeeded") and name not in self.running_at:
                self.running_at[name] = time.monotonic()

    async def cluster(self, name: str, cpus: float, labels: dict[str, str] | None = None) -> Path:
        path = self.tmp / name
        path.mkdir(parents=True, exist_ok=True)
        await self.attach(name, {"manager": "local", "cpus": cpus, "memory": 10_000_000,
                                 "config": {"state_dir": str(path), "grace_period": 0.2}}, labels)
        return path

    async def attach(self, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None,
                     timeout: float = 600) -> None:
        """Register a Cluster of any manager and wait until it is Ready."""
        obj = await self.store.create("clusters", {
            "apiVersion": "skyshift.io/v1", "kind": "Cluster",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "generation": 1,
                         "creationTimestamp": now_iso(), "labels": labels or {}},
            "spec": spec, "status": {"phase": "Init"},
        })
        await starter.ensure_lifecycle(self.client, obj)
        deadline = time.monotonic() + timeout
        while (status := (await self.store.get("clusters", name)).get("status") or {}).get(
                "phase") != "Ready":
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster {name} not Ready after {timeout:.0f} s: {status}")
            await asyncio.sleep(0.1)

    async def submit(self, name: str, run: str, cpus: float = 0.001,
                     only: dict[str, str] | None = None,
                     envs: dict[str, str] | None = None) -> float:
        t0 = time.monotonic()
        obj = await self.store.create("jobs", {
            "apiVersion": "skyshift.io/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4()),
                         "generation": 1, "creationTimestamp": now_iso(), "labels": {}},
            "spec": {"run": run, "resources": {"cpus": cpus, "memory": 0},
                     "restartPolicy": "Never", "envs": envs or {},
                     "placement": {"filters": [{"matchLabels": only}] if only else []}},
            "status": {"phase": "Pending"},
        })
        await starter.ensure_lifecycle(self.client, obj)
        return t0

    async def wait_running(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while any(n not in self.running_at for n in names):
            if time.monotonic() > deadline:
                missing = [n for n in names if n not in self.running_at]
                raise TimeoutError(f"{len(missing)} jobs not Running, e.g. {missing[:3]}")
            await asyncio.sleep(0.05)

    async def latency(self, n: int) -> None:
        lat = []
        for i in range(n):
            name = f"lat-{i}"
            t0 = await self.submit(name, "sleep 3")
            await self.wait_running([name], 60)
            lat.append(self.running_at[name] - t0)
        print(f"submit->Running over {n} jobs: p50 {pct(lat, 50) * 1000:.0f} ms, "
              f"p99 {pct(lat, 99) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")
        self.results["submit_to_running"] = {
            "n": n, "p50_ms": round(pct(lat, 50) * 1000, 1),
            "p99_ms": round(pct(lat, 99) * 1000, 1), "max_ms": round(max(lat) * 1000, 1),
            "samples_ms": [round(x * 1000, 1) for x in lat],
        }

    async def burst(self, n: int, concurrency: int = 32) -> tuple[float, list[str]]:
        names = [f"burst-{i}" for i in range(n)]
        sem = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with sem:
                await self.submit(name, "sleep 240")

        self.cpu.start()
        t0 = time.monotonic()
        await asyncio.gather(*(one(nm) for nm in names))
        t_sub = time.monotonic() - t0
        await self.wait_running(names, 900)
        took = max(self.running_at[nm] for nm in names) - t0
        cpu = self.cpu.per_item_ms(n)
        rate = n / took
        self.results["burst"] = {"jobs": n, "submitted_s": round(t_sub, 1),
                                 "all_running_s": round(took, 1), "jobs_per_s": round(rate, 2),
                                 "cpu_ms_per_job": cpu}
        print(f"burst of {n}: submitted in {t_sub:.1f} s, all Running after {took:.1f} s "
              f"= {rate:.1f} jobs/s; CPU ms per job: {cpu}")
        return rate, names

    async def ceiling(self, n: int) -> float:
        queue = f"bench-minimal-{uuid.uuid4().hex[:6]}"
        async with Worker(self.client, task_queue=queue, workflows=[Minimal],
                          activities=[noop]):
            self.cpu.start()
            t0 = time.monotonic()
            handles = await asyncio.gather(*(
                self.client.start_workflow(Minimal.run, i, id=f"{queue}-{i}", task_queue=queue)
                for i in range(n)))
            await asyncio.gather(*(h.result() for h in handles))
            rate = n / (time.monotonic() - t0)
            cpu = self.cpu.per_item_ms(n)
        print(f"minimal workflow (3 no-op activities) x{n}: {rate:.1f} workflows/s; "
              f"CPU ms per workflow: {cpu}")
        self.results["minimal_workflow_ceiling"] = {"workflows": n,
                                                    "workflows_per_s": round(rate, 2),
                                                    "cpu_ms_per_workflow": cpu}
        return rate

    async def events(self, ids: list[str]) -> int:
        sem = asyncio.Semaphore(32)

        async def one(wf_id: str) -> int:
            async with sem:
                d = await self.client.get_workflow_handle(wf_id).describe()
                return int(d.raw_description.workflow_execution_info.history_length)

        return sum(await asyncio.gather(*(one(i) for i in ids)))

    async def idle(self, names: list[str], window: float, key: str = "idle") -> None:
        ids = [f"job/{NS}/{n}" for n in names] + ["scheduler", "cluster/bench-main"]
        # "All Running" is read from etcd, which the skylet writes before the job workflows
        # have processed their signals: wait until the histories stop growing (at most 120 s),
        # or the window measures the tail of the burst instead of the idle cost.
        settle_t0, last = time.monotonic(), await self.events(ids)
        while time.monotonic() - settle_t0 < 120:
            await asyncio.sleep(5)
            now = await self.events(ids)
            if now == last:
                break
            last = now
        self.results[f"{key}_settle_s"] = round(time.monotonic() - settle_t0, 1)
        e0, r0, t0 = await self.events(ids), await self.store.revision(), time.monotonic()
        await asyncio.sleep(window)
        e1, r1, t1 = await self.events(ids), await self.store.revision(), time.monotonic()
        dt = t1 - t0
        self.results[key] = {"running_jobs": len(names), "window_s": round(dt),
                                "history_events_per_s": round((e1 - e0) / dt, 3),
                                "etcd_writes_per_s": round((r1 - r0) / dt, 3)}
        print(f"idle with {len(names)} Running jobs over {dt:.0f} s: "
              f"{(e1 - e0) / dt:.2f} history events/s, {(r1 - r0) / dt:.2f} etcd writes/s")

    async def failover(self) -> None:
        a = await self.cluster("bench-fo-a", 4, {"bench": "failover"})
        await self.cluster("bench-fo-b", 4, {"bench": "failover"})
        await self.submit("fo-job", "sleep 600", cpus=3, only={"bench": "failover"})
        await self.wait_running(["fo-job"], 60)
        job = await self.store.get("jobs", "fo-job", NS)
        lost = "bench-fo-a" if "bench-fo-a" in job["status"]["placement"] else "bench-fo-b"
        path = a if lost == "bench-fo-a" else self.tmp / "bench-fo-b"
        t0 = time.monotonic()
        (path / "OFFLINE").touch()
        while True:
            job = await self.store.get("jobs", "fo-job", NS)
            st = job.get("status") or {}
            other = next(c for c in ("bench-fo-a", "bench-fo-b") if c != lost)
            if st.get("placement") == {other: 1} and (st.get("replicaStatus") or {}).get(
                other, {}
            ).get("Running"):
                break
            await asyncio.sleep(0.05)
        self.results["failover_s"] = round(time.monotonic() - t0, 2)
        print(f"failover: job Running on {other} {time.monotonic() - t0:.1f} s after "
              f"{lost} became unreachable")
        (path / "OFFLINE").unlink()


async def stop_replicas(root: Path) -> None:
    """Stop every replica the benchmark started (through the adapter, by job uid)."""
    from skyshift.compat.local.adapter import LocalManager

    for path in sorted(root.glob("*")):
        (path / "OFFLINE").unlink(missing_ok=True)
        mgr = LocalManager(path.name, {"state_dir": str(path), "cpus": 1, "grace_period": 0.2})
        sem = asyncio.Semaphore(16)

        async def one(uid: str, m: LocalManager = mgr, s: asyncio.Semaphore = sem) -> None:
            async with s:
                await m.delete_job(uid)

        await asyncio.gather(*(one(u) for u in {r.job_uid for r in await mgr.replicas()}))


async def stop_stack(procs: list[Any], tmp: Path) -> None:
    """Stop what ``spawn`` started (last first) and the replicas left on its clusters."""
    for p in reversed(procs):
        if isinstance(p, subprocess.Popen):
            p.terminate()
            p.wait(30)
        else:
            p.stop()
    await stop_replicas(tmp / "clusters")


def stack_pids(procs: list[Any]) -> dict[str, int]:
    """Name -> pid of the spawned processes (etcd, temporal, control, skylet_manager)."""
    names = ["etcd", "temporal", "control", "skylet_manager"]
    out = {}
    for name, p in zip(names, procs, strict=False):
        popen = p if isinstance(p, subprocess.Popen) else getattr(p, "proc", None)
        if popen is not None:
            out[name] = popen.pid
    return out


def spawn(tmp: Path) -> tuple[dict[str, str], list[Any]]:
    from tests.fixtures.etcd import EtcdServer
    from tests.fixtures.temporal import DevServer

    etcd = EtcdServer("/usr/bin/etcd", tmp / "etcd")
    etcd.start()
    temporal = DevServer("temporal", tmp)
    temporal.start()
    env = {**os.environ, "SKYSHIFT_ETCD": etcd.endpoint,
           "SKYSHIFT_TEMPORAL_ADDRESS": temporal.address, "SKYSHIFT_HOME": str(tmp / "home"),
           "SKYSHIFT_STORE_PREFIX": "/bench", "SKYSHIFT_LOG_LEVEL": "WARNING",
           "SKYSHIFT_LOST_AFTER": "5", "SKYSHIFT_SYNC_INTERVAL": "1"}
    procs: list[Any] = [etcd, temporal]
    for which in ("control", "skylet_manager"):
        log = (tmp / f"{which}.log").open("ab")
        procs.append(subprocess.Popen([sys.executable, "-m", f"skyshift.workers.{which}"],
                                      env=env, stdout=log, stderr=log))
    for which in ("control", "skylet_manager"):
        while not (tmp / "home" / "run" / f"{which}.ready").exists():
            time.sleep(0.1)
    os.environ.update(env)
    return env, procs


async def main(args: argparse.Namespace, tmp: Path, procs: list[Any]) -> None:
    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    bench = Bench(store, client, tmp / "clusters", stack_pids(procs))
    watcher = asyncio.create_task(bench.watch_running())
    try:
        await bench.cluster("bench-main", 100_000)
        if args.latency_jobs:
            await bench.latency(args.latency_jobs)
            await asyncio.sleep(5)  # let the latency jobs finish
        if args.burst:
            small: list[str] = []
            if args.idle_small:
                small = [f"idle-{i}" for i in range(args.idle_small)]
                for name in small:
                    await bench.submit(name, "sleep 900")
                await bench.wait_running(small, 300)
                await bench.idle(small, args.idle_window, "idle_small")
            rate, names = await bench.burst(args.burst)
            await bench.idle(small + names, args.idle_window)
            ceiling = await bench.ceiling(args.ceiling or args.burst)
            print(f"burst / ceiling = {rate / ceiling:.2f}")
            bench.results["burst_over_ceiling"] = round(rate / ceiling, 3)
        try:
            await bench.failover()
        except TimeoutError as exc:  # record what was measured; say what was not
            bench.results["failover_error"] = str(exc)
            print(f"failover not measured: {exc}")
    finally:
        watcher.cancel()
        if bench.results:
            print(f"wrote {write_result('lifecycle', bench.results)}")
        await stop_stack(procs, tmp)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spawn", action="store_true", help="run a private stack")
    ap.add_argument("--latency-jobs", type=int, default=200)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--ceiling", type=int, default=None,
                    help="minimal workflows to run (default: as many as the burst has jobs)")
    ap.add_argument("--idle-window", type=float, default=30.0)
    ap.add_argument("--idle-small", type=int, default=100,
                    help="jobs running during the first idle window (0: skip it)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 20 latency jobs, a burst of 100, 5 s idle windows")
    arguments = ap.parse_args()
    if arguments.quick:
        arguments.latency_jobs, arguments.burst = 20, 100
        arguments.idle_window, arguments.idle_small = 5.0, 10
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on SIGTERM too
    workdir = Path(tempfile.mkdtemp(prefix="skyshift-bench-"))
    spawned = spawn(workdir)[1] if arguments.spawn else []
    asyncio.run(main(arguments, workdir, spawned))
