"""Ray benchmark: prints figures, asserts nothing.

(Named ``ray_jobs.py``, not ``ray.py``: run as a script, its directory is on ``sys.path`` and a
``ray.py`` there would shadow the ``ray`` package it imports.)

Against one Ray head (``ray start --head`` through ``skyshift.devstack.sim.ray``), submit ->
Running latency over ``--jobs`` jobs submitted one at a time, in the same run:

- through SkyShift: POST of a Job (placement filtered to the Ray cluster) until GET says
  ``status.phase == Running`` (API with the admin token, Temporal, control worker, skylet
  manager, the ``ray`` adapter over the Jobs API);
- straight: ``JobSubmissionClient.submit_job`` on the same head until ``get_job_status`` says
  RUNNING, with the same entrypoint and resources.

Both use the same command (``--command``, default ``sleep 5``) and 0.5 CPU, and every job is
stopped and removed before the next, so the head is idle at each submit. The ratio of the
medians says what SkyShift adds on top of Ray's own start-up (the job supervisor actor, the
runtime env). Runs against the stack named by ``SKYSHIFT_SERVER``/``SKYSHIFT_HOME`` (what
``bench/run`` sets after ``skyshift up``), or a private ``skyshift up`` (``--spawn``). Needs
``ray[default]``. ``--quick``: 5 jobs each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import pct, write_result
from bench.slurm import stack, token_for
from skyshift.client.async_client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.compat.ray.map import RayMeta
from skyshift.devstack.sim.ray import SimRayCluster, start_ray_clusters, stop_ray_clusters

CLUSTER = "bench-ray"
NS = "default"
CPUS = 0.5


def log(msg: str) -> None:
    print(msg, flush=True)


def figures(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_s": round(pct(samples, 50), 3),
        "p99_s": round(pct(samples, 99), 3),
        "max_s": round(max(samples), 3) if samples else 0.0,
    }


def straight_latency(sim: SimRayCluster, n: int, command: str, run_id: str) -> list[float]:
    """``submit_job`` -> RUNNING on the head, one job at a time, each removed afterwards."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(sim.address)
    samples = []
    for i in range(n):
        sid = f"straight-{run_id}-{i}"
        t0 = time.monotonic()
        client.submit_job(entrypoint=command, submission_id=sid, entrypoint_num_cpus=CPUS)
        while (status := client.get_job_status(sid)) != JobStatus.RUNNING:
            if status.is_terminal() or time.monotonic() - t0 > 300:
                raise SystemExit(f"Ray job {sid} ended {status} before RUNNING")
            time.sleep(0.02)
        samples.append(time.monotonic() - t0)
        client.stop_job(sid)
        while not client.get_job_status(sid).is_terminal():
            time.sleep(0.1)
        client.delete_job(sid)
    return samples


def ray_start_time(sim: SimRayCluster, job_uid: str) -> float | None:
    """When Ray took the submission of ``job_uid``'s replica (epoch seconds), from its job
    listing (``start_time``, set as the Jobs API accepts the submit)."""
    from ray.job_submission import JobSubmissionClient

    for job in JobSubmissionClient(sim.address).list_jobs():
        meta = RayMeta.from_metadata(job.metadata)
        if meta is not None and meta.job_uid == job_uid and job.start_time:
            return float(job.start_time) / 1000.0
    return None


async def skyshift_latency(api: AsyncSkyShiftClient, n: int, command: str, run_id: str,
                           sim: SimRayCluster | None = None,
                           parts: dict[str, list[float]] | None = None) -> list[float]:
    """POST -> Running per job; with ``sim`` and ``parts``, also where the time went: the POST's
    own answer (``post``) and the wait until Ray took the submit (``to_ray_submit``)."""
    samples = []
    for i in range(n):
        name = f"lat-{run_id}-{i}"
        wall0, t0 = time.time(), time.monotonic()
        created = await api.create({
            "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"run": command, "resources": {"cpus": CPUS}, "restartPolicy": "Never",
                     "placement": {"filters": [{"matchLabels": {"bench": CLUSTER}}]}},
        })
        posted = time.monotonic() - t0
        while True:
            phase = ((await api.get("jobs", name)).get("status") or {}).get("phase")
            if phase == "Running":
                break
            if phase in ("Succeeded", "Failed") or time.monotonic() - t0 > 300:
                raise SystemExit(f"job {name} ended {phase} before Running")
            await asyncio.sleep(0.02)
        samples.append(time.monotonic() - t0)
        if sim is not None and parts is not None:
            uid = str((created.get("metadata") or {}).get("uid") or "")
            started = await asyncio.to_thread(ray_start_time, sim, uid)
            if started is not None:
                parts.setdefault("post", []).append(posted)
                parts.setdefault("to_ray_submit", []).append(started - wall0)
        await api.delete("jobs", name, NS)
        while True:
            try:
                await api.get("jobs", name)
            except ApiError as exc:
                if exc.status == 404:
                    break
                raise
            await asyncio.sleep(0.2)
    return samples


async def attach(api: AsyncSkyShiftClient, sim: SimRayCluster) -> None:
    with contextlib.suppress(ApiError):
        await api.delete("clusters", CLUSTER)
    await api.create({
        "kind": "Cluster", "metadata": {"name": CLUSTER, "labels": {"bench": CLUSTER}},
        "spec": {"manager": "ray", "config": sim.adapter_config()},
    })
    deadline = time.monotonic() + 180
    while True:
        status = (await api.get("clusters", CLUSTER)).get("status") or {}
        if status.get("phase") == "Ready":
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"cluster {CLUSTER} did not become Ready: {status}")
        await asyncio.sleep(0.2)


async def run(args: argparse.Namespace, url: str, home: Path,
              sim: SimRayCluster) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    api = AsyncSkyShiftClient(url, token=token_for(url, home), namespace=NS, timeout=120)
    try:
        await attach(api, sim)
        log(f"cluster {CLUSTER}: Ray head on {sim.address} ({sim.cpus} CPUs), attached, Ready")
        # one warm-up each: the first job on a fresh head pays for worker start-up
        await skyshift_latency(api, 1, args.command, f"{run_id}w")
        await asyncio.to_thread(straight_latency, sim, 1, args.command, f"{run_id}w")
        parts: dict[str, list[float]] = {}
        through = await skyshift_latency(api, args.jobs, args.command, run_id, sim, parts)
        direct = await asyncio.to_thread(straight_latency, sim, args.jobs, args.command, run_id)
        with contextlib.suppress(ApiError):
            await api.delete("clusters", CLUSTER)
    finally:
        await api.aclose()
    a, b = figures(through), figures(direct)
    ratio = a["p50_s"] / b["p50_s"] if b["p50_s"] else 0.0
    load = os.getloadavg()[0]
    log(f"submit -> Running over {args.jobs} jobs one at a time: SkyShift p50 {a['p50_s']:.2f} s,"
        f" p99 {a['p99_s']:.2f} s; JobSubmissionClient straight p50 {b['p50_s']:.2f} s, p99 "
        f"{b['p99_s']:.2f} s; ratio of medians {ratio:.2f} (load {load:.1f})")
    split = breakdown(parts, a["p50_s"], b["p50_s"])
    if split:
        log("SkyShift's share, medians: POST answered in {post_s:.3f} s, Ray took the submit "
            "{to_ray_submit_s:.3f} s after the POST began, the rest (Ray's own start, as "
            "straight, then the skylet seeing RUNNING and the GET) {rest_s:.3f} s".format(**split))
    return {
        "skyshift_breakdown_p50": split,
        "command": args.command,
        "cpus_per_job": CPUS,
        "skyshift_submit_to_running": a,
        "straight_submit_to_running": b,
        "ratio_p50": round(ratio, 3),
        "ray_p50_over_straight": round(ratio, 3),  # issue #29's name for it
        "load_1m": round(load, 2),
        "head_cpus": sim.cpus,
    }


def breakdown(parts: dict[str, list[float]], total: float, straight: float) -> dict[str, float]:
    """Medians of the parts of SkyShift's submit -> Running; ``after_ray_running_s`` is what is
    left once Ray's own start (the straight median) is taken off the time after its submit:
    the skylet's next listing, its etcd write and the client's GET."""
    if not parts.get("to_ray_submit"):
        return {}
    post, to_submit = pct(parts["post"], 50), pct(parts["to_ray_submit"], 50)
    rest = total - to_submit
    return {"post_s": round(post, 3), "to_ray_submit_s": round(to_submit, 3),
            "rest_s": round(rest, 3), "after_ray_running_s": round(rest - straight, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 jobs each")
    ap.add_argument("--spawn", action="store_true", help="always run a private stack")
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--command", default="sleep 5")
    args = ap.parse_args()
    if args.quick:
        args.jobs = min(args.jobs, 5)
    tmp = Path(tempfile.mkdtemp(prefix="srb-", dir="/tmp"))  # short: Ray's socket paths
    tmp.chmod(0o711)  # skyshift-run, whom the head runs as when we are root, must enter it
    with stack(args.spawn) as (url, home, _temporal):
        log(f"starting one Ray head in {tmp}")
        [sim] = start_ray_clusters(tmp, clusters=1, cpus=2, prefix="rb", progress=log)
        try:
            result = asyncio.run(run(args, url, home, sim))
        finally:
            stop_ray_clusters(tmp)
    path = write_result("ray_jobs", result)
    log(f"wrote {path}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
