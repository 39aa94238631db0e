"""Slurm benchmark: prints figures, asserts nothing.

Against one simulated Slurm cluster (real slurmctld/slurmd, ``skyshift.devstack.sim.slurm``),
through the whole stack (API with the admin token, Temporal, control worker, skylet manager,
Slurm adapter), beside the same work submitted straight with ``sbatch`` in the same run:

1. submit -> Running latency, p50/p99 over ``--latency-jobs`` jobs submitted one at a time (the
   way the original was measured): SkyShift from POST to ``status.phase == Running`` seen with
   GET; straight from ``sbatch`` to ``squeue`` saying RUNNING;
2. draining ``--drain`` short jobs (``--command``, default ``sleep 1``): from the first submission
   until every job has finished, SkyShift (POSTs from ``--concurrency`` clients, until every Job
   is Succeeded or Failed) against ``sbatch`` (same concurrency, until squeue shows every job
   finished); the ratio SkyShift/sbatch. Job ends are read through one API watch (a user's
   ``skyctl get jobs --watch``), not by polling the whole list. SkyShift hands Slurm jobs
   beyond its free CPUs up to the cluster's queue bound (``queue_depth``, default one
   capacity's worth; recorded as ``sim.queue_limit_cpus``), so Slurm starts the next job as
   soon as one ends;
3. the Temporal floor (``bench/_floor.py``; ``drain.temporal_floor_s``, ``floor_over_sbatch``):
   ``--drain`` minimal workflows on the same Temporal server, what one workflow per job needs on
   this machine before any job runs.
   Both report the CPU they cost, per job and per minimal workflow, by part of the machine
   (``drain.cpu_ms_per_job``, ``drain.floor_cpu_ms_per_workflow``: control worker, skylet
   manager, API, Temporal, etcd, the Slurm daemons, and this process, which runs the floor's
   worker).

The original SkyShift, measured on a single-node Slurm 22.05 (reference/skyshift-original.md):
submit -> RUNNING p50 3.15 s (20 jobs one at a time), and a burst of 50 one-second jobs drained
in 76.1 s against 72.8 s straight (ratio 1.05). Those figures are recorded beside ours.

Runs against the stack named by ``SKYSHIFT_SERVER``/``SKYSHIFT_HOME`` (what ``bench/run`` sets
after ``skyshift up``), or starts a private ``skyshift up`` when there is none (or ``--spawn``).
Needs root and scripts/install-slurm.sh (slurmd runs jobs as their owner). ``--quick`` is a
smoke run (10 latency jobs, 50 to drain).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._floor import temporal_floor
from bench._util import cpu_snapshot, cpu_used, pct, per_item_ms, write_result
from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.config import Settings
from skyshift.devstack import procs
from skyshift.devstack.sim.slurm import (
    SimSlurmCluster,
    SimSlurmError,
    check_prerequisites,
    start_slurm_clusters,
    stop_slurm_clusters,
)

CLUSTER = "bench-slurm"
NS = "default"
ORIGINAL = {
    "submit_to_running_p50_s": 3.15,
    "submit_to_running_p90_s": 3.81,
    "latency_jobs": 20,
    "burst_jobs": 50,
    "burst_skyshift_s": 76.1,
    "burst_sbatch_s": 72.8,
    "burst_ratio": round(76.1 / 72.8, 3),
}
LIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- the stack ------------------------------------------------------------------------------


@contextlib.contextmanager
def stack(spawn: bool) -> Iterator[tuple[str, Path, str]]:
    """(API URL, SKYSHIFT_HOME, Temporal address) of the stack in the environment, or of a
    private one."""
    if not spawn and os.environ.get("SKYSHIFT_SERVER") and os.environ.get("SKYSHIFT_HOME"):
        yield (os.environ["SKYSHIFT_SERVER"], Path(os.environ["SKYSHIFT_HOME"]),
               Settings.from_env().temporal_address)
        return
    from tests.fixtures.stack import new_stack

    home = Path(tempfile.mkdtemp(prefix="skyshift-bench-slurm-"))
    dev = new_stack(home)
    log(f"starting a private stack in {home} (skyshift up)")
    up = dev.run_skyshift("up", timeout=600)
    if up.returncode != 0:
        dev.run_skyshift("down")
        raise SystemExit(f"skyshift up failed:\n{up.stdout}\n{up.stderr}")
    try:
        yield dev.api_url, home, dev.temporal_address
    finally:
        dev.run_skyshift("down")
        shutil.rmtree(home, ignore_errors=True)


def token_for(url: str, home: Path) -> str:
    if os.environ.get("SKYSHIFT_TOKEN"):
        return os.environ["SKYSHIFT_TOKEN"]
    from skyshift.devstack.login import admin_login

    return admin_login(url, home).token


# ---- Slurm straight ---------------------------------------------------------------------------


class Straight:
    """sbatch/squeue on the sim cluster, the way a user without SkyShift would."""

    def __init__(self, sim: SimSlurmCluster, workdir: Path) -> None:
        self.sim = sim
        self.env = {**os.environ, **sim.env}
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)

    def sbatch(self, command: str, name: str) -> int:
        out = subprocess.run(
            ["sbatch", "--parsable", f"--job-name={name}", "--nodes=1", "--ntasks=1",
             "--cpus-per-task=1", f"--chdir={self.workdir}", f"--output={self.workdir}/%j.out",
             "--wrap", command],
            capture_output=True, text=True, env=self.env, timeout=60, check=True,
        ).stdout
        return int(out.strip().split(";")[0])

    def states(self) -> dict[int, str]:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T"], capture_output=True,
                             text=True, env=self.env, timeout=60, check=True).stdout
        states = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                states[int(parts[0])] = parts[1]
        return states

    def state(self, job_id: int) -> str:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T"],
                             capture_output=True, text=True, env=self.env, timeout=60).stdout
        return out.strip()

    def latency(self, n: int, command: str) -> list[float]:
        samples = []
        for i in range(n):
            t0 = time.monotonic()
            job_id = self.sbatch(command, f"lat-straight-{i}")
            while self.state(job_id) not in ("RUNNING", "COMPLETED", "COMPLETING"):
                if time.monotonic() - t0 > 120:
                    raise SystemExit(f"Slurm job {job_id} not RUNNING after 120 s")
                time.sleep(0.02)
            samples.append(time.monotonic() - t0)
        return samples

    def drain(self, n: int, command: str, concurrency: int) -> dict[str, float]:
        t0 = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            ids = list(pool.map(lambda i: self.sbatch(command, f"drain-straight-{i}"), range(n)))
        submitted = time.monotonic() - t0
        wanted = set(ids)
        while True:
            states = self.states()
            left = [i for i in wanted if states.get(i, "COMPLETED") in LIVE]
            if not left:
                break
            if time.monotonic() - t0 > 1800:
                log(f"warning: {len(left)} Slurm jobs unfinished after 1800 s")
                break
            time.sleep(0.2)
        took = time.monotonic() - t0
        failed = sum(1 for i in wanted if states.get(i, "COMPLETED") != "COMPLETED")
        return {"seconds": took, "submit_seconds": submitted, "failed": failed}

    def wait_idle(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(s in LIVE for s in self.states().values()):
                return
            time.sleep(0.5)
        log("warning: Slurm still busy; going on")


# ---- through SkyShift -----------------------------------------------------------------------


class ThroughSkyShift:
    def __init__(self, api: AsyncSkyShiftClient, run_id: str) -> None:
        self.api = api
        self.run_id = run_id
        self.names: list[str] = []

    async def attach(self, sim: SimSlurmCluster, workdir: Path, queue_depth: float | None = None,
                     poll_interval: float | None = None) -> None:
        with contextlib.suppress(ApiError):
            await self.api.delete("clusters", CLUSTER)
            await self._gone("clusters", CLUSTER, 120)
        await self.api.create({
            "kind": "Cluster", "metadata": {"name": CLUSTER, "labels": {"bench": CLUSTER}},
            "spec": {"manager": "slurm", "config": {
                **sim.adapter_config(workdir),
                **({} if queue_depth is None else {"queue_depth": queue_depth}),
                **({} if poll_interval is None else {"poll_interval": poll_interval}),
            }},
        })
        deadline = time.monotonic() + 120
        while True:
            obj = await self.api.get("clusters", CLUSTER)
            status = obj.get("status") or {}
            if status.get("phase") == "Ready":
                return
            if status.get("phase") == "Error" or time.monotonic() > deadline:
                raise SystemExit(f"cluster {CLUSTER} did not become Ready: {status}")
            await asyncio.sleep(0.2)

    async def submit(self, name: str, command: str) -> None:
        await self.api.create({
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"bench-run": self.run_id}},
            "spec": {"run": command, "resources": {"cpus": 1}, "restartPolicy": "Never",
                     "placement": {"filters": [{"matchLabels": {"bench": CLUSTER}}]}},
        })
        self.names.append(name)

    async def latency(self, n: int, command: str) -> list[float]:
        samples = []
        for i in range(n):
            name = f"lat-{self.run_id}-{i}"
            t0 = time.monotonic()
            await self.submit(name, command)
            deadline = t0 + 120
            while True:
                phase = ((await self.api.get("jobs", name)).get("status") or {}).get("phase")
                if phase in ("Running", "Succeeded", "Failed"):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"job {name} not Running after 120 s (phase {phase})")
                await asyncio.sleep(0.02)
            samples.append(time.monotonic() - t0)
            if phase == "Failed":
                log(f"warning: latency job {name} Failed")
        return samples

    async def drain(self, n: int, command: str, concurrency: int) -> dict[str, float]:
        tag = f"drain-{self.run_id}"
        names = [f"{tag}-{i}" for i in range(n)]
        sem = asyncio.Semaphore(concurrency)
        wanted = set(names)
        phases: dict[str, str | None] = {}

        async def one(name: str) -> None:
            async with sem:
                await self.submit(name, command)

        # Ends are seen through one watch, as `skyctl get jobs --watch` would: polling a full
        # list of the 500 jobs four times a second cost the API and etcd more CPU than the
        # jobs' own lifecycles, and the straight side's squeue polling costs slurmctld little.
        seen = asyncio.create_task(self._watch_ends(wanted, phases))
        t0 = time.monotonic()
        await asyncio.gather(*(one(nm) for nm in names))
        submitted = time.monotonic() - t0
        try:
            await asyncio.wait_for(seen, max(1.0, t0 + 1800 - time.monotonic()))
        except TimeoutError:
            log(f"warning: {len(wanted - self._ended(phases))} jobs unfinished after 1800 s")
        took = time.monotonic() - t0
        failed = sum(1 for nm in wanted if phases.get(nm) != "Succeeded")
        return {"seconds": took, "submit_seconds": submitted, "failed": failed}

    @staticmethod
    def _ended(phases: dict[str, str | None]) -> set[str]:
        return {nm for nm, ph in phases.items() if ph in ("Succeeded", "Failed")}

    async def _watch_ends(self, wanted: set[str], phases: dict[str, str | None]) -> None:
        """Until every wanted job has ended: a list, then a watch from its revision (a list
        again whenever the watch ends or fails, so nothing is missed)."""
        selector = {"bench-run": self.run_id}
        while not wanted <= self._ended(phases):
            page = await self.api.list("jobs", NS, label_selector=selector)
            for o in page["items"]:
                phases[o["metadata"]["name"]] = (o.get("status") or {}).get("phase")
            rv = (page.get("metadata") or {}).get("resourceVersion")
            with contextlib.suppress(ApiError, httpx.HTTPError):
                async for ev in self.api.watch("jobs", namespace=NS, resource_version=rv,
                                               label_selector=selector, timeout=300):
                    if ev.type not in ("ADDED", "MODIFIED"):
                        continue
                    name = ev.object["metadata"]["name"]
                    phase = (ev.object.get("status") or {}).get("phase")
                    phases[name] = phase
                    if phase in ("Succeeded", "Failed") and wanted <= self._ended(phases):
                        return

    async def _gone(self, kind: str, name: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                await self.api.get(kind, name)
            except ApiError as exc:
                if exc.status == 404:
                    return True
                raise
            await asyncio.sleep(0.5)
        return False

    async def cleanup(self, concurrency: int = 16) -> float:
        """Delete the jobs (their records on Slurm go with them), then the cluster."""
        t0 = time.monotonic()
        sem = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with sem:
                with contextlib.suppress(ApiError):
                    await self.api.delete("jobs", name, NS)

        await asyncio.gather(*(one(nm) for nm in self.names))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            left = (await self.api.list("jobs", NS, label_selector={"bench-run": self.run_id}))[
                "items"]
            if not left:
                break
            await asyncio.sleep(1.0)
        else:
            log("warning: some bench jobs are still being deleted")
        took = time.monotonic() - t0
        with contextlib.suppress(ApiError):
            await self.api.delete("clusters", CLUSTER)
            await self._gone("clusters", CLUSTER, 120)
        return took


# ---- main -----------------------------------------------------------------------------------


def parts(home: Path, sim: SimSlurmCluster) -> dict[str, list[int | None]]:
    """The processes whose CPU the drain is charged with, by part."""
    run = home / "run"
    return {
        "control": [procs.read_pid(run / "control.pid")],
        "skylet_manager": [procs.read_pid(run / "skylet-manager.pid")],
        "api": [procs.read_pid(run / "api.pid")],
        "temporal": [procs.read_pid(run / "temporal.pid")],
        "etcd": [procs.read_pid(run / "etcd.pid")],
        "slurm_daemons": sim.daemon_pids(),
        "bench": [os.getpid()],
    }


def figures(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_s": round(pct(samples, 50), 3),
        "p99_s": round(pct(samples, 99), 3),
        "max_s": round(max(samples), 3) if samples else 0.0,
        "mean_s": round(sum(samples) / len(samples), 3) if samples else 0.0,
    }


async def run(args: argparse.Namespace, url: str, home: Path, temporal: str,
              sim: SimSlurmCluster, tmp: Path) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    straight = Straight(sim, tmp / "straight")
    api = AsyncSkyShiftClient(url, token=token_for(url, home), namespace=NS, timeout=120)
    sky = ThroughSkyShift(api, run_id)
    slots = len(sim.nodes) * sim.node_cpus
    out: dict[str, Any] = {
        "sim": {"nodes": len(sim.nodes), "cpus_per_node": sim.node_cpus, "slots": slots,
                "poll_interval": args.poll_interval},
        "original": ORIGINAL,
    }
    try:
        await sky.attach(sim, tmp / "skyshift", args.queue_depth, args.poll_interval)
        log(f"cluster {CLUSTER}: {len(sim.nodes)} nodes x {sim.node_cpus} CPUs ({slots} "
            f"one-CPU jobs at once), attached and Ready")
        queue = ((await api.get("clusters", CLUSTER)).get("status") or {}).get("queue") or {}
        # how much SkyShift may keep waiting in Slurm's own queue (the adapter's queue_depth)
        out["sim"]["queue_limit_cpus"] = float((queue.get("limit") or {}).get("cpus", 0.0))

        lat = await sky.latency(args.latency_jobs, args.latency_command)
        out["skyshift_submit_to_running"] = figures(lat)
        straight.wait_idle()
        base = await asyncio.to_thread(straight.latency, args.latency_jobs, args.latency_command)
        out["sbatch_submit_to_running"] = figures(base)
        a, b = out["skyshift_submit_to_running"], out["sbatch_submit_to_running"]
        log(f"submit -> Running over {len(lat)} jobs one at a time: SkyShift p50 "
            f"{a['p50_s']:.2f} s, p99 {a['p99_s']:.2f} s (max {a['max_s']:.2f}); sbatch -> "
            f"RUNNING p50 {b['p50_s']:.2f} s, p99 {b['p99_s']:.2f} s; original SkyShift p50 "
            f"{ORIGINAL['submit_to_running_p50_s']} s")
        straight.wait_idle()

        ideal = math.ceil(args.drain / slots) * args.sleep_s if args.sleep_s else 0.0
        direct = await asyncio.to_thread(straight.drain, args.drain, args.command,
                                         args.concurrency)
        log(f"drain {args.drain} x `{args.command}` straight with sbatch: "
            f"{direct['seconds']:.1f} s (submitted in {direct['submit_seconds']:.1f} s, "
            f"{direct['failed']} not COMPLETED)")
        straight.wait_idle()
        groups = parts(home, sim)
        cpu0 = cpu_snapshot(groups)
        through = await sky.drain(args.drain, args.command, args.concurrency)
        drain_cpu = cpu_used(cpu0, cpu_snapshot(groups))
        log(f"drain {args.drain} x `{args.command}` through SkyShift: {through['seconds']:.1f} s "
            f"(submitted in {through['submit_seconds']:.1f} s, {through['failed']} not "
            f"Succeeded)")
        ratio = through["seconds"] / direct["seconds"] if direct["seconds"] else 0.0
        log(f"drain ratio SkyShift/sbatch = {ratio:.2f} (original: 50 one-second jobs, "
            f"{ORIGINAL['burst_skyshift_s']} s vs {ORIGINAL['burst_sbatch_s']} s = "
            f"{ORIGINAL['burst_ratio']:.2f}); ideal with {slots} slots: {ideal:.0f} s")
        out["drain"] = {
            "jobs": args.drain,
            "sleep_s": args.sleep_s,
            "concurrency": args.concurrency,
            "ideal_s": ideal,
            "skyshift_s": round(through["seconds"], 2),
            "skyshift_submit_s": round(through["submit_seconds"], 2),
            "skyshift_not_succeeded": through["failed"],
            "sbatch_s": round(direct["seconds"], 2),
            "sbatch_submit_s": round(direct["submit_seconds"], 2),
            "sbatch_not_completed": direct["failed"],
            "ratio_skyshift_over_sbatch": round(ratio, 3),
            "skyshift_jobs_per_s": round(args.drain / through["seconds"], 2),
            "sbatch_jobs_per_s": round(args.drain / direct["seconds"], 2),
        }
        cpu0 = cpu_snapshot(groups)
        floor = await temporal_floor(temporal, args.drain, args.concurrency)
        floor_cpu = cpu_used(cpu0, cpu_snapshot(groups))
        # where the CPU went, per job and per minimal workflow (the floor's workflows and
        # their worker run in this process: "bench")
        out["drain"]["cpu_s"] = drain_cpu
        out["drain"]["cpu_ms_per_job"] = per_item_ms(drain_cpu, args.drain)
        out["drain"]["floor_cpu_ms_per_workflow"] = per_item_ms(floor_cpu, args.drain)
        log(f"CPU ms per job during the drain: {out['drain']['cpu_ms_per_job']}; per minimal "
            f"workflow: {out['drain']['floor_cpu_ms_per_workflow']}")
        out["drain"]["temporal_floor_s"] = round(floor, 2)
        out["drain"]["floor_over_sbatch"] = round(floor / direct["seconds"], 3)
        # issue #29's names: the drain over the floor, and a job's CPU over a minimal workflow's
        out["slurm_drain_over_floor"] = round(through["seconds"] / floor, 3) if floor else 0.0
        job_ms = (out["drain"]["cpu_ms_per_job"] or {}).get("total") or 0.0
        wf_ms = (out["drain"]["floor_cpu_ms_per_workflow"] or {}).get("total") or 0.0
        out["slurm_cpu_per_job_over_minimal"] = round(job_ms / wf_ms, 3) if wf_ms else 0.0
        log(f"floor: {args.drain} minimal workflows (3 no-op activities) on the same Temporal "
            f"server took {floor:.1f} s = {floor / direct['seconds']:.2f}x the sbatch drain")
        out["command"] = args.command
        cleanup = await sky.cleanup()
        log(f"cleanup: deleted {len(sky.names)} jobs through the API in {cleanup:.1f} s")
        out["cleanup_delete_all_s"] = round(cleanup, 1)
    finally:
        await api.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 10 latency jobs, 50 to drain")
    ap.add_argument("--spawn", action="store_true", help="always run a private stack")
    ap.add_argument("--latency-jobs", type=int, default=100)
    ap.add_argument("--latency-command", default="sleep 3")
    ap.add_argument("--drain", type=int, default=500)
    ap.add_argument("--command", default="sleep 1", help="what each drained job runs")
    ap.add_argument("--concurrency", type=int, default=16, help="clients submitting the drain")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--node-cpus", type=int, default=16)
    ap.add_argument("--queue-depth", type=float, default=None,
                    help="the cluster's queue_depth (default: the adapter's; 0 turns the "
                         "batch queue off, for an A/B run)")
    ap.add_argument("--poll-interval", type=float, default=None,
                    help="the cluster's poll_interval: seconds between the skylet's sync rounds "
                         "(default: the skylet's, 1 s)")
    args = ap.parse_args()
    if args.quick:
        args.latency_jobs, args.drain = min(args.latency_jobs, 10), min(args.drain, 50)
    words = args.command.split()
    args.sleep_s = float(words[1]) if len(words) == 2 and words[0] == "sleep" else 0.0
    try:
        check_prerequisites()
    except SimSlurmError as exc:
        raise SystemExit(f"cannot run the Slurm benchmark: {exc}") from None
    # short: slurmstepd's socket <home>/slurm/bs1/spool/<node>/<node>_<job id>.4294967291 must
    # fit in 108 bytes, or launches fail once job ids grow ("launch_failed_requeued_held")
    tmp = Path(tempfile.mkdtemp(prefix="ssb-", dir="/tmp"))
    longest = f"{tmp}/slurm/bs1/spool/bs1-n{args.nodes}/bs1-n{args.nodes}_9999999.4294967291"
    if len(longest) > 100:
        raise SystemExit(f"{tmp} is too long a home for Slurm's socket paths")
    with stack(args.spawn) as (url, home, temporal):
        log(f"starting one simulated Slurm cluster in {tmp}")
        sims = start_slurm_clusters(tmp / "slurm", clusters=1, nodes=args.nodes,
                                    node_cpus=args.node_cpus, node_memory=16000, prefix="bs")
        try:
            result = asyncio.run(run(args, url, home, temporal, sims[0], tmp))
        finally:
            stop_slurm_clusters(tmp / "slurm")
    path = write_result("slurm", result)
    log(f"wrote {path}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
