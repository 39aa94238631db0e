"""Provisioning benchmark: prints figures, asserts nothing.

On the SkyPilot test bed (skyshift/devstack/sim/skypilot.py: SkyPilot 0.14 against a simulated
Slurm cluster through an sshd login node), through the whole stack (API, Temporal, control
worker and skylet manager of a private ``skyshift up``), beside the same work done straight
with SkyPilot's SDK (the driver SkyShift uses, as the same user) in the same run:

1. time to a usable cluster: SkyShift from POST of a Cluster with ``provision`` (1 node, 2 CPUs,
   2 GB) to ``status.phase == Ready``; straight, ``sky launch`` of the same shape until it
   returns;
2. job latency on it: ``--jobs`` one-replica jobs (``true``, 1 CPU) one at a time, SkyShift from
   POST to ``Succeeded``, straight from ``sky exec`` (async) until ``sky queue`` says SUCCEEDED;
3. teardown: SkyShift from DELETE until the Cluster is gone (its SkyPilot cluster down);
   straight, ``sky down``.

Medians and the ratios SkyShift/straight. Needs root, scripts/install-slurm.sh and
scripts/install-skypilot.sh. ``--quick``: 2 jobs each. About ten minutes on 2 cores (a SkyPilot
call takes seconds; a launch about a minute). A launch and down of a throwaway cluster comes
first, counted on neither side: the bed's first launch is slower than the ones after it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import write_result
from bench.slurm import log, stack, token_for
from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.compat.provision_types import LaunchRequest, NodeShape
from skyshift.compat.skypilot.client import SkyPilotClient, stop_api_server
from skyshift.devstack.sim.skypilot import SkySlurm, missing, sky_slurm_bed

SHAPE = NodeShape(cpus=2, memory_gb=2)
DONE = {"SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_DRIVER", "CANCELLED"}


def median(samples: list[float]) -> float:
    return round(statistics.median(samples), 3) if samples else 0.0


def seen(steps: dict[str, float], what: str, t0: float) -> None:
    """Record the first time ``what`` was seen, in seconds from ``t0``."""
    if what and what not in steps:
        steps[what] = round(time.monotonic() - t0, 2)


def steps_text(steps: dict[str, float]) -> str:
    return ", ".join(f"{k} at {v:.1f} s" for k, v in steps.items())


def straight(bed: SkySlurm, client: SkyPilotClient, jobs: int) -> dict[str, Any]:
    """SkyPilot's SDK alone: launch, exec one at a time, down."""
    name = f"bench-sky-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    client.launch(LaunchRequest(cluster=name, infra=bed.infra, nodes=1, shape=SHAPE,
                                timeout_s=900), lambda _: None)
    launch = time.monotonic() - t0
    log(f"straight: sky launch {launch:.1f} s")
    latency: list[float] = []
    try:
        for i in range(jobs):
            t0 = time.monotonic()
            job_id = client.exec_async(name, f"bench-{i}", "true", {}, cpus=1)
            while True:
                table = client.queue([name])[name]
                if isinstance(table, Exception):
                    raise table
                status = next((j.status for j in table if j.job_id == job_id), "")
                if status in DONE:
                    break
                time.sleep(0.2)
            latency.append(time.monotonic() - t0)
            log(f"straight: sky exec job {i}: {latency[-1]:.1f} s ({status})")
    finally:
        t0 = time.monotonic()
        client.down(name, lambda _: None)
        down = time.monotonic() - t0
    log(f"straight: sky down {down:.1f} s")
    return {"launch_s": round(launch, 3), "job_s": [round(x, 3) for x in latency],
            "job_p50_s": median(latency), "down_s": round(down, 3)}


def warm_up(bed: SkySlurm, client: SkyPilotClient) -> None:
    """One launch and down of a throwaway cluster, not counted."""
    name = f"bench-warm-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    try:
        client.launch(LaunchRequest(cluster=name, infra=bed.infra, nodes=1, shape=SHAPE,
                                    timeout_s=900), lambda _: None)
        log(f"warm-up: sky launch {time.monotonic() - t0:.1f} s (not counted)")
    finally:
        client.down(name, lambda _: None)


async def through_skyshift(api: AsyncSkyShiftClient, bed: SkySlurm,
                           jobs: int) -> dict[str, Any]:
    name, run = "bench-pv", uuid.uuid4().hex[:6]
    t0 = time.monotonic()
    await api.create({"kind": "Cluster", "metadata": {"name": name, "labels": {"bench": name}},
                      "spec": {"provision": {
        "infra": bed.infra, "cpus": SHAPE.cpus, "memory": f"{SHAPE.memory_gb:g}G",
        "nodes": {"min": 1, "max": 1}}}})
    status: dict[str, Any] = {}
    steps: dict[str, float] = {}  # when each phase (and the launch's end) was first seen
    while status.get("phase") != "Ready":
        status = (await api.get("clusters", name)).get("status") or {}
        seen(steps, str(status.get("phase")), t0)
        if (status.get("provision") or {}).get("skyClusters"):
            seen(steps, "launched", t0)
        if status.get("phase") in ("Failed", "Error") or time.monotonic() - t0 > 900:
            raise SystemExit(f"cluster {name} did not become Ready: {status}")
        await asyncio.sleep(0.2)
    ready = time.monotonic() - t0
    log(f"SkyShift: Cluster Ready {ready:.1f} s ({steps_text(steps)})")
    latency: list[float] = []
    job_steps: list[dict[str, float]] = []
    try:
        for i in range(jobs):
            job = f"pv-{run}-{i}"
            t0 = time.monotonic()
            await api.create({"kind": "Job", "metadata": {"name": job}, "spec": {
                "run": "true", "resources": {"cpus": 1}, "restartPolicy": "Never",
                "placement": {"filters": [{"matchLabels": {"bench": name}}]}}})
            phase = ""
            job_steps.append({})
            while phase not in ("Succeeded", "Failed"):
                phase = ((await api.get("jobs", job)).get("status") or {}).get("phase") or ""
                seen(job_steps[-1], phase, t0)
                if time.monotonic() - t0 > 600:
                    raise SystemExit(f"job {job} not finished after 600 s ({phase})")
                await asyncio.sleep(0.1)
            latency.append(time.monotonic() - t0)
            log(f"SkyShift: job {i}: {latency[-1]:.1f} s ({phase}; {steps_text(job_steps[-1])})")
            await api.delete("jobs", job)
    finally:
        t0 = time.monotonic()
        await api.delete("clusters", name)
        while True:
            try:
                await api.get("clusters", name)
            except ApiError as exc:
                if exc.status == 404:
                    break
                raise
            await asyncio.sleep(0.5)
        down = time.monotonic() - t0
    log(f"SkyShift: Cluster gone {down:.1f} s")
    return {"ready_s": round(ready, 3), "ready_steps_s": steps, "job_steps_s": job_steps,
            "job_s": [round(x, 3) for x in latency],
            "job_p50_s": median(latency), "delete_s": round(down, 3)}


async def run(args: argparse.Namespace, bed: SkySlurm) -> dict[str, Any]:
    client = SkyPilotClient(user=bed.user)
    # SkyPilot's API server starts with the first call (about 20 s), and the bed's first launch
    # takes about 10 s more than the ones after it (42-44 s against 31 s in the provisioning
    # e2e runs): neither side pays for either, the side measured first used to pay the second
    await asyncio.to_thread(client.check, [bed.infra.split("/")[0]])
    await asyncio.to_thread(warm_up, bed, client)
    with stack(args.spawn) as (url, home, _temporal):
        async with AsyncSkyShiftClient(url, token=token_for(url, home), namespace="default",
                                       timeout=120) as api:
            ours = await through_skyshift(api, bed, args.jobs)
    theirs = await asyncio.to_thread(straight, bed, client, args.jobs)
    stop_api_server(client)
    result = {
        "skyshift": ours, "skypilot_straight": theirs,
        "ready_over_launch": round(ours["ready_s"] / theirs["launch_s"], 3),
        "job_p50_ratio": round(ours["job_p50_s"] / theirs["job_p50_s"], 3)
        if theirs["job_p50_s"] else 0.0,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    # issue #29's names for the two ratios
    result["skypilot_ready_over_launch"] = result["ready_over_launch"]
    result["skypilot_job_p50_over_exec"] = result["job_p50_ratio"]
    log(f"time to Ready {ours['ready_s']:.1f} s vs sky launch {theirs['launch_s']:.1f} s "
        f"({result['ready_over_launch']}x); job p50 {ours['job_p50_s']:.1f} s vs sky exec "
        f"{theirs['job_p50_s']:.1f} s ({result['job_p50_ratio']}x)")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 jobs each")
    ap.add_argument("--spawn", action="store_true", help="always run a private stack")
    ap.add_argument("--jobs", type=int, default=5, help="jobs one at a time, each side")
    args = ap.parse_args()
    if args.quick:
        args.jobs = min(args.jobs, 2)
    lack = missing()
    if lack is not None:
        raise SystemExit(f"cannot run the provisioning benchmark: it needs {lack}")
    with sky_slurm_bed() as bed:
        result = asyncio.run(run(args, bed))
    log(f"wrote {write_result('provision', result)}")


if __name__ == "__main__":
    main()
