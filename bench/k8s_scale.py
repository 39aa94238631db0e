"""Kubernetes scale benchmark: prints figures, asserts nothing.

Three simulated clusters (``skyshift sim k8s``: real kube-apiserver, scheduler and controller
manager, ``--nodes`` kwok nodes each, 8 CPUs / 32Gi per node) attached to a running stack through
the API as ``k8`` clusters; then, for each size in ``--jobs`` (ascending), that many jobs of
``--replicas`` replicas (0.5 CPU each, running until deleted) submitted at once through the API
(``--concurrency`` requests in flight), and:

1. placement throughput: jobs placed per second (first submission -> last job placed, and over
   the placement window alone);
2. submit -> Running per job (API create sent -> status Running seen in etcd), p50/p99;
3. peak RSS (VmHWM) of the control worker and the skylet manager;
4. CPU seconds each part used meanwhile (SkyShift workers, API, Temporal, etcd, the simulated
   clusters), which tells where a 2-core machine's time went, and the test bed's idle CPU;
5. teardown: all jobs deleted through the API until their pods are gone from every apiserver;
6. the baseline (``bench/_k8s_direct.py``; ``direct`` in each size, ``over_direct`` the ratio):
   once every size ran, the clusters are detached from SkyShift (so its sync loops do not load
   the apiservers meanwhile) and the same pods (per cluster as SkyShift spread them, same
   requests) are created straight through the kube API with the official client, at the same
   concurrency, on the same clusters, and timed the same way to all Running;
7. the Temporal floor (``bench/_floor.py``; ``temporal_floor_s``, ``floor_over_direct``): as
   many minimal workflows as there were jobs, on the same Temporal server while the clusters
   idle: what one workflow per job needs on this machine before any pod is made;
8. the floor with the pods (``floor_with_pods_s``, ``floor_with_pods_over_direct``): the
   baseline's pods and the floor's workflows at once, the best a design with one workflow per
   job could reach on this machine, where the simulated clusters share the cores.

A size that does not reach all-Running within ``--deadline`` seconds is reported with what it
did reach, and the next size tried is half of it (down to 25 jobs), so the figures always include
the largest size that completed. Also recorded: the test bed's cold build (figures of a
quiet-machine build, as given), its warm check (``scripts/build-k8s.sh`` on a warm cache) and the
warm start of one cluster (measured here, with 2 nodes and with ``--nodes``). ``headline`` holds
the figures of the largest completed size; bench/report.py renders them as a flat table.

Stack: the one in the environment (``SKYSHIFT_SERVER``/``SKYSHIFT_HOME``/``SKYSHIFT_ETCD``, as
``bench/run`` provides), or a private ``skyshift up`` with ``--spawn``. Results go to
bench/results/latest.json as ``k8s_scale``.

Usage: ``python bench/k8s_scale.py --spawn`` (full: 3 x 100 nodes, 1,000 jobs x 4, about six
minutes on 2 cores); ``--quick``: 3 x 10 nodes, 40 jobs x 4.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._floor import temporal_floor  # noqa: E402
from bench._k8s_direct import Direct  # noqa: E402
from bench._util import cpu_snapshot, cpu_used, summary_ms, write_result  # noqa: E402
from skyshift.client.async_client import AsyncSkyShiftClient  # noqa: E402
from skyshift.client.errors import ApiError  # noqa: E402
from skyshift.config import Settings  # noqa: E402
from skyshift.devstack import procs  # noqa: E402
from skyshift.devstack.sim.k8s import (  # noqa: E402
    COMPONENTS,
    NodeShape,
    SimK8sCluster,
    start_k8s_clusters,
    stop_k8s_clusters,
)
from skyshift.store import ObjectStore  # noqa: E402

NS = "k8s-scale"
LABEL = {"bench": "k8s-scale"}
SHAPE = NodeShape(cpus="8", memory="32Gi", pods=110)
CPUS_PER_REPLICA = 0.5
MEMORY_MB = 64
#: a cold `scripts/build-k8s.sh` on a quiet 2-core machine (measured by the previous engineer)
COLD_BUILD: dict[str, Any] = {
    "total_s": 344,
    "parts": "kube-apiserver 193 s, kube-controller-manager 56 s, kwok 78 s, etcd 8 s, "
             "kube-scheduler 3 s",
    "source": "given: a cold build on a quiet 2-core machine, not re-measured here",
}


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- the test bed -----------------------------------------------------------------------------


def warm_check() -> float:
    t0 = time.monotonic()
    subprocess.run([str(ROOT / "scripts" / "build-k8s.sh")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def start_clusters(home: Path, clusters: int, nodes: int) -> tuple[list[SimK8sCluster],
                                                                      dict[str, float]]:
    """One small cluster alone (the test fixture's size), then one with ``nodes`` alone, then the
    rest in parallel; each start's seconds."""
    figures: dict[str, float] = {}
    small = home / "one-small"
    t0 = time.monotonic()
    start_k8s_clusters(1, 2, SHAPE, home=small, timeout=300)
    figures["one_cluster_2_nodes_s"] = round(time.monotonic() - t0, 2)
    stop_k8s_clusters(small, purge=True)
    t0 = time.monotonic()
    start_k8s_clusters(1, nodes, SHAPE, home=home, timeout=600)
    figures[f"one_cluster_{nodes}_nodes_s"] = round(time.monotonic() - t0, 2)
    t0 = time.monotonic()
    sims = start_k8s_clusters(clusters, nodes, SHAPE, home=home, timeout=900)
    figures[f"other_{clusters - 1}_clusters_parallel_s"] = round(time.monotonic() - t0, 2)
    return sims, figures


async def count_pods(sims: list[SimK8sCluster]) -> int:
    """SkyShift's pods (terminating included) on every cluster, from the apiservers."""
    total = 0
    for sim in sims:
        tls = ssl.create_default_context(cafile=str(sim.ca_file))
        async with httpx.AsyncClient(base_url=sim.server, verify=tls, timeout=30.0,
                                     headers={"Authorization": f"Bearer {sim.token}"}) as http:
            resp = await http.get("/api/v1/namespaces/skyshift/pods",
                                  params={"labelSelector": "skyshift.io/managed-by=skyshift",
                                          "limit": "500"})
            if resp.status_code == 404:
                continue
            resp.raise_for_status()
            data = resp.json()
            total += len(data["items"]) + int(data["metadata"].get("remainingItemCount") or 0)
    return total


# ---- the stack -------------------------------------------------------------------------------


class Stack:
    """The stack of the environment, or a private ``skyshift up`` (``--spawn``)."""

    def __init__(self, spawn: bool) -> None:
        self.dev: Any = None
        if spawn or not os.environ.get("SKYSHIFT_SERVER"):
            from tests.fixtures.stack import new_stack

            self.dev = new_stack(Path(tempfile.mkdtemp(prefix="skyshift-k8s-scale-home-")))
            log(f"starting a private stack in {self.dev.home} (skyshift up)")
            up = self.dev.run_skyshift("up", timeout=600)
            if up.returncode != 0:
                self.dev.run_skyshift("down")
                raise SystemExit(f"skyshift up failed:\n{up.stdout}\n{up.stderr}")
            os.environ.update(self.dev.env)
        self.home = Path(os.environ["SKYSHIFT_HOME"])
        self.url = os.environ["SKYSHIFT_SERVER"]

    def token(self) -> str:
        if os.environ.get("SKYSHIFT_TOKEN"):
            return os.environ["SKYSHIFT_TOKEN"]
        from tests.fixtures.auth import admin_token

        return admin_token(self.url, self.home)

    def worker_pids(self) -> dict[str, int | None]:
        return {name: procs.read_pid(self.home / "run" / f"{name}.pid")
                for name in ("control", "skylet-manager")}

    def down(self) -> None:
        if self.dev is not None:
            self.dev.run_skyshift("down")
            shutil.rmtree(self.dev.home, ignore_errors=True)
            self.dev = None


def memory_mb(pid: int | None) -> dict[str, float]:
    """Current and peak resident memory of a process (MB), from /proc."""
    out: dict[str, float] = {}
    if pid is None:
        return out
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out["rss_mb" if key == "VmRSS" else "peak_rss_mb"] = round(
                    int(value.split()[0]) / 1024, 1)
    except OSError:
        pass
    return out


def parts(stack: Stack, sims: list[SimK8sCluster]) -> dict[str, list[int | None]]:
    """The processes of each part of the machine's load."""
    run = stack.home / "run"
    return {
        "skyshift_workers": [procs.read_pid(run / f"{n}.pid") for n in ("control",
                                                                         "skylet-manager")],
        "api": [procs.read_pid(run / "api.pid")],
        "temporal": [procs.read_pid(run / "temporal.pid")],
        "etcd": [procs.read_pid(run / "etcd.pid")],
        "k8s_test_bed": [sim.pid(c) for sim in sims for c in COMPONENTS],
        # the same processes again by component (over every cluster): where the test bed's
        # share went, e.g. what SkyShift's watches cost the kube-apiservers beyond direct
        **{f"test_bed.{c}": [sim.pid(c) for sim in sims] for c in COMPONENTS},
    }


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return round(100 * (after[0] - before[0]) / total, 1) if total else 0.0


def at_fraction(times: list[float], total: int, fraction: float) -> float | None:
    """When ``fraction`` of ``total`` had happened (None if never): a figure one straggler
    does not decide."""
    need = max(1, math.ceil(fraction * total))
    return sorted(times)[need - 1] if len(times) >= need else None


# ---- one size ----------------------------------------------------------------------------------


class Run:
    def __init__(self, api: AsyncSkyShiftClient, store: ObjectStore, size: int, replicas: int,
                 concurrency: int, tag: str) -> None:
        self.api, self.store = api, store
        self.size, self.replicas, self.concurrency = size, replicas, concurrency
        self.names = [f"s{tag}-{i}" for i in range(size)]
        self.sent: dict[str, float] = {}
        self.placed: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.placement: dict[str, dict[str, int]] = {}  # job -> cluster -> replicas
        self.errors: list[str] = []

    async def watch(self) -> None:
        wanted = set(self.names)
        rev = (await self.store.list("jobs", NS, limit=1)).resource_version
        async for ev in self.store.watch("jobs", NS, from_revision=rev):
            name = ev.object["metadata"]["name"]
            if name not in wanted:
                continue
            status = ev.object.get("status") or {}
            now = time.monotonic()
            if status.get("placement"):
                self.placement[name] = dict(status["placement"])
            if (status.get("placement") or status.get("phase") in ("Scheduled", "Running")) and (
                name not in self.placed
            ):
                self.placed[name] = now
            if status.get("phase") == "Running" and name not in self.running:
                self.running[name] = now

    async def submit_all(self) -> float:
        sem = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> None:
            async with sem:
                self.sent[name] = time.monotonic()
                try:
                    await self.api.create({
                        "kind": "Job",
                        "metadata": {"name": name, "namespace": NS, "labels": dict(LABEL)},
                        "spec": {"run": "sleep 3600", "replicas": self.replicas,
                                 "restartPolicy": "Never",
                                 "resources": {"cpus": CPUS_PER_REPLICA, "memory": MEMORY_MB},
                                 "placement": {"filters": [{"matchLabels": dict(LABEL)}]}},
                    }, NS)
                except ApiError as exc:
                    self.errors.append(f"{name}: {exc}")

        t0 = time.monotonic()
        await asyncio.gather(*(one(n) for n in self.names))
        return time.monotonic() - t0

    async def wait_running(self, deadline: float, on_progress: Any, every: float = 10.0) -> bool:
        """Wait until every job is Running (False at ``deadline``); ``on_progress()`` runs
        whenever more jobs are Running than at the last look."""
        last, seen = 0.0, 0
        while len(self.running) < self.size - len(self.errors):
            if time.monotonic() > deadline:
                return False
            if len(self.running) > seen:
                seen = len(self.running)
                on_progress()
            if time.monotonic() - last >= every:
                log(f"  {len(self.placed)} placed, {len(self.running)} Running of {self.size}")
                last = time.monotonic()
            await asyncio.sleep(0.2)
        on_progress()
        return True

    def spread(self) -> dict[str, int]:
        """Replicas SkyShift put on each cluster (keyed by the cluster's Kubernetes name)."""
        out: dict[str, int] = {}
        for placement in self.placement.values():
            for cluster, n in placement.items():
                sim = cluster.removeprefix("scale-")
                out[sim] = out.get(sim, 0) + int(n)
        return out

    def figures(self, t0: float, complete: bool, submit_s: float) -> dict[str, Any]:
        lat = [self.running[n] - self.sent[n] for n in self.running]
        latency = summary_ms(lat)
        out: dict[str, Any] = {
            "completed": complete, "submitted_in_s": round(submit_s, 2),
            "placed": len(self.placed), "running": len(self.running),
            "submit_to_running_ms": {k: latency[k] for k in ("p50_ms", "p99_ms")},
        }
        if self.errors:
            out["submit_errors"] = len(self.errors)
        if self.placed:
            first, last = min(self.placed.values()), max(self.placed.values())
            out["placed_per_s_from_first_submit"] = round(len(self.placed) / (last - t0), 1)
            if last > first:
                out["placed_per_s_placement_window"] = round(
                    len(self.placed) / (last - first), 1)
        if self.running:
            out["all_running_after_s"] = round(max(self.running.values()) - t0, 1)
        if (at := at_fraction(list(self.running.values()), self.size, 0.99)) is not None:
            out["running_99pct_after_s"] = round(at - t0, 1)
        out["replicas_per_cluster"] = self.spread()
        return out

    async def teardown(self, sims: list[SimK8sCluster], timeout: float) -> float | None:
        t0 = time.monotonic()
        sem = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> None:
            async with sem:
                try:
                    await self.api.delete("jobs", name, NS)
                except ApiError as exc:
                    if exc.status != 404:
                        log(f"  delete {name}: {exc}")

        await asyncio.gather(*(one(n) for n in self.names))
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            left = len((await self.store.list("jobs", NS)).items)
            pods = await count_pods(sims)
            if not left and not pods:
                return time.monotonic() - t0
            await asyncio.sleep(2)
        log(f"  teardown incomplete after {timeout:g}s")
        return None


# ---- main --------------------------------------------------------------------------------------


async def attach(api: AsyncSkyShiftClient, sims: list[SimK8sCluster]) -> float:
    t0 = time.monotonic()
    try:
        await api.create({"kind": "Namespace", "metadata": {"name": NS}})
    except ApiError as exc:
        if exc.status != 409:
            raise
    for sim in sims:
        try:
            await api.create({
                "kind": "Cluster",
                "metadata": {"name": f"scale-{sim.name}", "labels": dict(LABEL)},
                "spec": {"manager": "k8", "config": {"kubeconfig": str(sim.kubeconfig),
                                                     "context": sim.context,
                                                     "grace_period": 0}},
            })
        except ApiError as exc:
            if exc.status != 409:
                raise
    for sim in sims:
        while True:
            obj = await api.get("clusters", f"scale-{sim.name}")
            phase = (obj.get("status") or {}).get("phase")
            if phase == "Ready":
                break
            if phase == "Error":
                raise SystemExit(f"cluster scale-{sim.name}: {obj['status'].get('message')}")
            await asyncio.sleep(0.5)
    return time.monotonic() - t0


async def detach(api: AsyncSkyShiftClient, sims: list[SimK8sCluster]) -> None:
    for sim in sims:
        with contextlib.suppress(ApiError):
            await api.delete("clusters", f"scale-{sim.name}")
    deadline = time.monotonic() + 120
    for sim in sims:
        while time.monotonic() < deadline:
            try:
                await api.get("clusters", f"scale-{sim.name}")
            except ApiError:
                break
            await asyncio.sleep(0.5)


async def one_size(args: argparse.Namespace, api: AsyncSkyShiftClient, store: ObjectStore,
                   sims: list[SimK8sCluster], groups: dict[str, list[int | None]], size: int,
                   tag: str) -> dict[str, Any]:
    run = Run(api, store, size, args.replicas, args.concurrency, tag)
    watcher = asyncio.create_task(run.watch())
    await asyncio.sleep(0.5)  # the watch is open
    log(f"{size} jobs x {args.replicas} replicas: submitting")
    cpu0, busy0 = cpu_snapshot(groups), machine_ticks()
    t0 = time.monotonic()
    # CPU up to the last time more jobs reached Running (not the idle wait of a stuck size)
    mark: list[Any] = [t0, cpu0, busy0]

    def progress() -> None:
        mark[:] = [time.monotonic(), cpu_snapshot(groups), machine_ticks()]

    submit_s = await run.submit_all()
    log(f"  submitted in {submit_s:.1f} s ({size / submit_s:.1f}/s), "
        f"{len(run.errors)} errors{': ' + run.errors[0] if run.errors else ''}")
    complete = await run.wait_running(t0 + args.deadline, progress) and not run.errors
    wall = mark[0] - t0
    figures = run.figures(t0, complete, submit_s)
    used = cpu_used(cpu0, mark[1])
    figures["cpu_s"] = used
    figures["cpu_s_wall"] = round(wall, 1)
    figures["machine_busy_pct"] = busy_pct(busy0, mark[2])
    lat = figures["submit_to_running_ms"]
    log(f"  placed {figures['placed']}, Running {figures['running']} of {size}; "
        f"placement {figures.get('placed_per_s_from_first_submit')} jobs/s "
        f"(window {figures.get('placed_per_s_placement_window')}); submit->Running p50 "
        f"{lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms")
    log(f"  CPU seconds over {wall:.0f} s wall ({os.cpu_count()} cores = "
        f"{(os.cpu_count() or 1) * wall:.0f} s): "
        + ", ".join(f"{g} {v}" for g, v in used.items())
        + f"; the whole machine was {figures['machine_busy_pct']}% busy (other work included)")
    watcher.cancel()
    teardown = await run.teardown(sims, args.teardown_timeout)
    figures["teardown_s"] = round(teardown, 1) if teardown is not None else -1
    log(f"  teardown (delete all, pods gone): "
        f"{'incomplete' if teardown is None else f'{teardown:.1f} s'}")
    return figures


async def baseline(args: argparse.Namespace, sims: list[SimK8sCluster],
                   groups: dict[str, list[int | None]], figures: dict[str, Any]) -> dict[str, Any]:
    """The same pods straight through the kube API (``_k8s_direct``), SkyShift's spread."""
    spread = figures["replicas_per_cluster"]
    log(f"direct baseline: {sum(spread.values())} pods over {len(spread)} clusters "
        f"({', '.join(f'{k} {v}' for k, v in sorted(spread.items()))}), "
        f"{args.concurrency} creates in flight")
    direct = Direct(sims, spread, args.concurrency, CPUS_PER_REPLICA, MEMORY_MB)
    try:
        cpu0, busy0 = cpu_snapshot(groups), machine_ticks()
        out = await direct.run(args.deadline)
        out["cpu_s"] = cpu_used(cpu0, cpu_snapshot(groups))
        out["machine_busy_pct"] = busy_pct(busy0, machine_ticks())
        gone = await asyncio.to_thread(direct.cleanup, args.teardown_timeout)
        out["teardown_s"] = round(gone, 1) if gone is not None else -1
    finally:
        direct.close()
    lat = out["submit_to_running_ms"]
    log(f"  direct: created in {out['submitted_in_s']} s, all Running after "
        f"{out.get('all_running_after_s')} s ({out['running']} of {out['pods']}); create->Running "
        f"p50 {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms; k8s test bed CPU "
        f"{out['cpu_s']['k8s_test_bed']} s; machine {out['machine_busy_pct']}% busy")
    if out.get("completed") and figures.get("completed") and out.get("all_running_after_s"):
        figures["over_direct"] = round(figures["all_running_after_s"]
                                       / out["all_running_after_s"], 2)
        log(f"  SkyShift {figures['all_running_after_s']} s / direct "
            f"{out['all_running_after_s']} s to all Running = {figures['over_direct']}x")
    if figures.get("running_99pct_after_s") and out.get("running_99pct_after_s"):
        figures["over_direct_99pct"] = round(figures["running_99pct_after_s"]
                                             / out["running_99pct_after_s"], 2)
        log(f"  to 99% Running: SkyShift {figures['running_99pct_after_s']} s / direct "
            f"{out['running_99pct_after_s']} s = {figures['over_direct_99pct']}x")
    return out


async def floor_with_pods(args: argparse.Namespace, sims: list[SimK8sCluster], address: str,
                          size: int, figures: dict[str, Any], direct_s: float) -> dict[str, Any]:
    """The reachable bound on this machine: the direct baseline's pods and as many minimal
    workflows, both at once. Any design with one durable workflow per job makes the same pods
    and pays at least the floor's Temporal work, on the same cores; the time until both are done
    is what such a design could reach here at best (the pods and the workflows of the floor
    share the bench process, as SkyShift's submissions do)."""
    direct = Direct(sims, figures["replicas_per_cluster"], args.concurrency, CPUS_PER_REPLICA,
                    MEMORY_MB)
    try:
        pods, floor = await asyncio.gather(direct.run(args.deadline),
                                           temporal_floor(address, size, args.concurrency))
        await asyncio.to_thread(direct.cleanup, args.teardown_timeout)
    finally:
        direct.close()
    pods_s = pods.get("all_running_after_s")
    if not pods.get("completed") or pods_s is None:
        log("  floor with the pods: the pods did not all reach Running")
        return {}
    both = max(float(pods_s), floor)
    out = {"floor_with_pods_s": round(both, 1),
           "floor_with_pods_over_direct": round(both / direct_s, 2),
           "floor_with_pods_parts_s": {"pods_running": pods_s, "workflows_done": round(floor, 1)}}
    log(f"  floor with the pods: the same pods and {size} minimal workflows at once: all "
        f"done after {both:.1f} s = {out['floor_with_pods_over_direct']}x direct "
        f"(pods Running after {pods_s} s, workflows done after {floor:.1f} s)")
    return out


async def bench(args: argparse.Namespace, stack: Stack, sims: list[SimK8sCluster],
                result: dict[str, Any]) -> None:
    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    api = AsyncSkyShiftClient(stack.url, token=stack.token(), namespace=NS, timeout=120)
    pids = stack.worker_pids()
    groups = parts(stack, sims)
    result["workers_rss_before_mb"] = {n: memory_mb(p).get("rss_mb") for n, p in pids.items()}
    try:
        result["attach_clusters_s"] = round(await attach(api, sims), 2)
        log(f"attached {len(sims)} clusters in {result['attach_clusters_s']} s")
        cpu0, t0 = cpu_snapshot(groups), time.monotonic()
        await asyncio.sleep(10)
        idle = cpu_used(cpu0, cpu_snapshot(groups))
        result["test_bed_idle_cpu_pct"] = round(100 * idle["k8s_test_bed"]
                                                / (time.monotonic() - t0), 1)
        log(f"idle: the simulated clusters use {result['test_bed_idle_cpu_pct']}% of one core")
        todo = sorted(args.jobs)
        while todo:
            size = todo.pop(0)
            figures = await one_size(args, api, store, sims, groups, size,
                                     f"{len(result.get('sizes', {}))}{os.getpid()}")
            result.setdefault("sizes", {})[str(size)] = figures
            write_result("k8s_scale", result)
            if not figures["completed"]:
                smaller = size // 2
                log(f"  {size} jobs did not all reach Running in {args.deadline:g} s"
                    + (f": trying {smaller}" if smaller >= 25 else ""))
                todo = [smaller] if smaller >= 25 and not any(
                    f.get("completed") for f in result["sizes"].values()) else []
        # the clusters leave SkyShift first: its sync loops must not load the apiservers
        # while Kubernetes alone is measured
        await detach(api, sims)
        for figures in result.get("sizes", {}).values():
            if figures.get("running") and not args.no_baseline:
                figures["direct"] = await baseline(args, sims, groups, figures)
                write_result("k8s_scale", result)
        for size, figures in result.get("sizes", {}).items():
            if figures.get("completed") and not args.no_baseline:
                floor = await temporal_floor(settings.temporal_address, int(size),
                                             args.concurrency)
                figures["temporal_floor_s"] = round(floor, 1)
                direct_s = (figures.get("direct") or {}).get("all_running_after_s")
                if direct_s:
                    figures["floor_over_direct"] = round(floor / direct_s, 2)
                log(f"  floor: {size} minimal workflows (3 no-op activities) on the same "
                    f"Temporal server, the clusters idling: {floor:.1f} s"
                    + (f" = {figures['floor_over_direct']}x direct" if direct_s else ""))
                write_result("k8s_scale", result)
                if direct_s:
                    figures.update(await floor_with_pods(args, sims, settings.temporal_address,
                                                         int(size), figures, direct_s))
                    write_result("k8s_scale", result)
    finally:
        peak = {n: memory_mb(p).get("peak_rss_mb") for n, p in pids.items()}
        done = [int(s) for s, f in result.get("sizes", {}).items() if f.get("completed")]
        result["largest_completed_jobs"] = max(done) if done else 0
        # no size all Running (a straggler): the largest size that ran, marked incomplete
        shown = done or [int(s) for s, f in result.get("sizes", {}).items() if f.get("running")]
        if shown:
            f = result["sizes"][str(max(shown))]
            result["headline"] = {
                "jobs": max(shown), "replicas_per_job": args.replicas,
                "all_jobs_running": bool(f.get("completed")),
                "running_99pct_after_s": f.get("running_99pct_after_s"),
                "direct_running_99pct_after_s": (f.get("direct") or {}).get(
                    "running_99pct_after_s"),
                "placed_per_s": f.get("placed_per_s_from_first_submit"),
                "submit_to_running_p50_ms": f["submit_to_running_ms"]["p50_ms"],
                "submit_to_running_p99_ms": f["submit_to_running_ms"]["p99_ms"],
                "all_running_after_s": f.get("all_running_after_s"),
                "direct_all_running_after_s": (f.get("direct") or {}).get("all_running_after_s"),
                "direct_submit_to_running_p50_ms": ((f.get("direct") or {}).get(
                    "submit_to_running_ms") or {}).get("p50_ms"),
                "over_direct": f.get("over_direct"),
                "temporal_floor_s": f.get("temporal_floor_s"),
                "floor_over_direct": f.get("floor_over_direct"),
                "floor_with_pods_over_direct": f.get("floor_with_pods_over_direct"),
                # issue #29's name: the whole stack over the floor with the pods
                "k8s_over_floor_with_pods": round(f["over_direct"] / f[
                    "floor_with_pods_over_direct"], 3) if f.get("over_direct") and f.get(
                    "floor_with_pods_over_direct") else None,
                "over_direct_99pct": f.get("over_direct_99pct"),
                "control_worker_peak_rss_mb": peak.get("control"),
                "skylet_manager_peak_rss_mb": peak.get("skylet-manager"),
            }
        result["workers_peak_rss_mb"] = peak
        await detach(api, sims)
        await api.aclose()
        await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spawn", action="store_true", help="run a private stack (skyshift up)")
    ap.add_argument("--quick", action="store_true", help="3 x 10 nodes, 40 jobs x 4")
    ap.add_argument("--clusters", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=100, help="kwok nodes per cluster")
    ap.add_argument("--jobs", default="1000",
                    help="sizes (comma separated), run in ascending order; a size that does not "
                         "complete is followed by half of it")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=32, help="API requests in flight")
    ap.add_argument("--deadline", type=float, default=900.0,
                    help="seconds a size may take to reach all-Running")
    ap.add_argument("--teardown-timeout", type=float, default=900.0)
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the direct-submission baseline (the same pods through the kube "
                         "API after SkyShift's run)")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.jobs = 10, "40"
    args.jobs = [int(x) for x in str(args.jobs).split(",") if x]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on SIGTERM too

    home = Path(tempfile.mkdtemp(prefix="skyshift-k8s-scale-"))
    result: dict[str, Any] = {
        "clusters": args.clusters, "nodes_per_cluster": args.nodes,
        "node_shape": {"cpus": SHAPE.cpus, "memory": SHAPE.memory},
        "replica_cpus": CPUS_PER_REPLICA, "concurrency": args.concurrency,
        "deadline_s": args.deadline, "test_bed_cold_build_s": COLD_BUILD["total_s"],
        "load_average_at_start": round(os.getloadavg()[0], 2),
        "test_bed_cold_build": {k: v for k, v in COLD_BUILD.items() if k != "total_s"},
    }
    stack: Stack | None = None
    try:
        result["test_bed_warm_check_s"] = round(warm_check(), 2)
        log(f"test bed warm check (scripts/build-k8s.sh): {result['test_bed_warm_check_s']} s; "
            f"cold build {COLD_BUILD['total_s']} s (given)")
        sims, starts = start_clusters(home, args.clusters, args.nodes)
        result["cluster_warm_start"] = starts
        log("warm start: " + ", ".join(f"{k} {v}" for k, v in starts.items()))
        stack = Stack(args.spawn)
        asyncio.run(bench(args, stack, sims, result))
    finally:
        write_result("k8s_scale", result)
        stop_k8s_clusters(home, purge=True)
        if stack is not None:
            stack.down()
        shutil.rmtree(home, ignore_errors=True)
    peak = result.get("workers_peak_rss_mb", {})
    log(f"largest size all Running: {result.get('largest_completed_jobs')} jobs; worker peak RSS "
        + ", ".join(f"{n} {v} MB" for n, v in peak.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
