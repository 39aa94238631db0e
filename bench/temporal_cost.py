"""Temporal's work per job, counted from the histories: ``python bench/temporal_cost.py --spawn``.

Per path (``--path local|slurm|k8s|ray|skypilot``, or ``all``: one private stack each; the beds
are in bench/_temporal_beds.py), registers one cluster of that kind, runs ``--jobs``
one-replica jobs (``true``, restartPolicy Never) on it to Succeeded, a few at a time (after one
job that is not counted: the stack's first job creates the scheduler workflow), then
reads every job workflow's history and counts per job (medians): history events (all of them,
and ``events_to_running``: those recorded by the time the job was Running, see
``running_mark``), workflow tasks, regular activities, local activities, signals received and
sent, and search attribute upserts. Two long-lived workflows share in the jobs' work, and what
they recorded during the run is divided among the jobs: the scheduler's (``scheduler_*``, with
its signals by name) and the cluster's (``cluster_*``: the skylet's sync rounds, one
long-running heartbeating activity each, whose events come only when a round returns). The same
counts are taken for the minimal workflow (three regular no-op activities):
``events_per_job_over_minimal`` is the job's events (its own plus both shares) over the minimal
workflow's. ``--dump`` prints one job's history, the cluster workflow's and the scheduler's,
event by event, with each signal's, activity's or phase's name.

Prints a table per path and merges ``temporal_cost.paths.<path>`` into
bench/results/latest.json (the other ``temporal_cost`` keys stay; the local path's ratio is also
``temporal_cost.events_per_job_over_minimal``, issue #29's name). Asserts nothing. The beds
need what bench/slurm.py, bench/k8s_scale.py, bench/ray_jobs.py and tests/fixtures/skypilot.py
need (root for Slurm and SkyPilot); SkyPilot takes minutes to launch its cluster and seconds per
``sky`` call, so its default is 4 jobs (30 elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._temporal_beds import BEDS, PATHS, Bed
from bench._util import RESULTS, write_result
from bench.lifecycle import NS, Bench, Minimal, noop, spawn, stack_pids, stop_stack
from skyshift.config import Settings
from skyshift.contract.names import PHASE, SCHEDULER_ID, SIG_REPLICAS
from skyshift.lifecycle.client import connect
from skyshift.store import ObjectStore

KINDS = {
    "workflow_tasks": EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    "activities": EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    "local_activities": EventType.EVENT_TYPE_MARKER_RECORDED,
    "signals_received": EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    "signals_sent": EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    "visibility_upserts": EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
}


def phase_set(event: Any) -> str | None:
    """The SkyShiftPhase an upsert sets (None: another event, or another attribute)."""
    if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        return None
    fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
    phase = fields.indexed_fields.get(PHASE.name)
    return None if phase is None else phase.data.decode().strip('"')


def running_mark(event: Any, seen: int) -> int | None:
    """Events recorded when the job became Running, if this event tells: the upsert of Running
    (the submit's result said so: local), else the skylet's first report, which comes after it
    wrote Running to etcd (Slurm, Kubernetes, Ray, SkyPilot: held starts, a short job's workflow
    is told only that it ended)."""
    if phase_set(event) == "Running":
        return seen
    signaled = event.workflow_execution_signaled_event_attributes
    if event.HasField("workflow_execution_signaled_event_attributes") and (
            signaled.signal_name == SIG_REPLICAS):
        return seen - 1
    return None


def detail(event: Any) -> str:
    """What --dump shows beside an event's type: the signal, activity or phase."""
    if event.HasField("workflow_execution_signaled_event_attributes"):
        return str(event.workflow_execution_signaled_event_attributes.signal_name)
    if event.HasField("activity_task_scheduled_event_attributes"):
        return str(event.activity_task_scheduled_event_attributes.activity_type.name)
    return phase_set(event) or ""


async def counts(client: Client, workflow_id: str, run_id: str | None = None) -> dict[str, int]:
    """Events of one workflow run by kind; for a job also ``events_to_running``: its events
    until it was Running (``running_mark``)."""
    out: collections.Counter[str] = collections.Counter()
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        out["events"] += 1
        for name, kind in KINDS.items():
            if event.event_type == kind:
                out[name] += 1
        if event.event_type == KINDS["signals_received"]:
            out[f"signal_{detail(event)}"] += 1
        if "events_to_running" not in out and (
                mark := running_mark(event, out["events"])) is not None:
            out["events_to_running"] = mark
    return dict(out)


def per_item(totals: list[dict[str, int]], extra: dict[str, int] | None = None,
             share: int = 1) -> dict[str, float]:
    keys = ["events", *KINDS] + (["events_to_running"] if "events_to_running" in totals[0]
                                  else [])
    out = {k: statistics.median([t.get(k, 0) for t in totals]) for k in keys}
    for k, v in (extra or {}).items():
        out[k] = out.get(k, 0) + v / share
    return {k: round(v, 2) for k, v in out.items()}


async def dump(client: Client, workflow_id: str, run_id: str | None = None) -> None:
    """Print one history's event types in order (what the counts are made of)."""
    print(f"-- {workflow_id} {run_id or ''}")
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        print(f"  {event.event_id:4d} {name} {detail(event)}")


async def runs(client: Client, workflow_id: str) -> list[dict[str, int]]:
    """Every run of a long-lived workflow (the scheduler's, a cluster's: they continue as new),
    counted."""
    out = []
    async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        out.append(await counts(client, wf.id, wf.run_id))
    return out


def summed(all_runs: list[dict[str, int]]) -> dict[str, int]:
    """The runs' counts added up (the kinds, and the signals received by name)."""
    keys = {"events", *KINDS}.union(*all_runs)
    return {k: sum(r.get(k, 0) for r in all_runs) for k in sorted(keys)
            if k != "events_to_running"}


async def minimal(client: Client, n: int) -> list[dict[str, int]]:
    queue = f"bench-minimal-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=[Minimal], activities=[noop]):
        handles = await asyncio.gather(*(
            client.start_workflow(Minimal.run, i, id=f"{queue}-{i}", task_queue=queue)
            for i in range(n)))
        await asyncio.gather(*(h.result() for h in handles))
    return [await counts(client, h.id) for h in handles]


async def run_jobs(bench: Bench, bed: Bed, n: int, concurrency: int,
                   prefix: str = "cost") -> dict[str, str]:
    """``n`` one-replica ``true`` jobs, ``concurrency`` in flight, each until it ended: name ->
    "Succeeded", or why it did not (its status message)."""
    names = [f"{prefix}-{i}" for i in range(n)]
    sem = asyncio.Semaphore(min(concurrency, bed.concurrency))
    ended: dict[str, str] = {}

    async def one(name: str) -> None:
        async with sem:
            await bench.submit(name, "true", cpus=bed.cpus, envs=bed.envs)
            deadline = time.monotonic() + 600
            while (st := (await bench.store.get("jobs", name, NS)).get("status") or {}).get(
                    "phase") not in ("Succeeded", "Failed"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"job {name} did not end in 600 s: {st}")
                await asyncio.sleep(0.1)
            ended[name] = "Succeeded" if st["phase"] == "Succeeded" else str(
                st.get("message") or st)

    await asyncio.gather(*(one(nm) for nm in names))
    return ended


async def share(client: Client, workflow_id: str, before: dict[str, int], prefix: str,
                n: int) -> dict[str, float]:
    """What a long-lived workflow recorded since ``before``, per job, keys under ``prefix``."""
    after = summed(await runs(client, workflow_id))
    return {f"{prefix}_{k}": round((after[k] - before.get(k, 0)) / n, 2) for k in after}


async def settled(client: Client, workflow_id: str, quiet: float = 3.0) -> None:
    """Wait until a workflow's history stops growing for ``quiet`` seconds (a cluster records
    Ready after etcd says so: those events belong to the attach, not to the jobs)."""
    last = -1
    while (now := summed(await runs(client, workflow_id))["events"]) != last:
        last = now
        await asyncio.sleep(quiet)


async def count_path(client: Client, bench: Bench, path: str, bed: Bed,
                     args: argparse.Namespace) -> dict[str, Any]:
    """Run the jobs on this path's cluster and count their histories, with their shares of the
    scheduler's and of the cluster workflow's (the skylet's sync rounds)."""
    cluster = f"cost-{path}"
    await bench.attach(cluster, bed.spec)
    # One job first, not counted: a stack's first job ever creates the scheduler workflow (its
    # start and its kind's search attribute), which a running system paid for long ago.
    await run_jobs(bench, bed, 1, 1, prefix="warmup")
    await settled(client, f"cluster/{cluster}")
    await settled(client, SCHEDULER_ID)
    sched0 = summed(await runs(client, SCHEDULER_ID))
    cluster0 = summed(await runs(client, f"cluster/{cluster}"))
    t0 = time.monotonic()
    ended = await run_jobs(bench, bed, args.jobs, args.concurrency)
    took = time.monotonic() - t0
    names = [nm for nm, why in ended.items() if why == "Succeeded"]  # the medians' jobs
    failed = {nm: why for nm, why in ended.items() if why != "Succeeded"}
    await asyncio.sleep(2)  # the last workflow tasks after Succeeded (search attributes)
    jobs = [await counts(client, f"job/{NS}/{nm}") for nm in names]
    if args.dump:
        await dump(client, f"job/{NS}/{names[-1]}")
        for wf_id in (f"cluster/{cluster}", SCHEDULER_ID):
            async for wf in client.list_workflows(f"WorkflowId = '{wf_id}'"):
                await dump(client, wf.id, wf.run_id)
    job = per_item(jobs)
    job.update(await share(client, SCHEDULER_ID, sched0, "scheduler", args.jobs))
    job.update(await share(client, f"cluster/{cluster}", cluster0, "cluster", args.jobs))
    return {"jobs": args.jobs, "concurrency": min(args.concurrency, bed.concurrency),
            "run_s": round(took, 1), "job": job,
            **({"failed": len(failed), "failed_example": next(iter(failed.values()))}
               if failed else {})}


def report(path: str, res: dict[str, Any], floor: dict[str, float]) -> None:
    job = res["job"]
    total = job["events"] + job["scheduler_events"] + job["cluster_events"]
    res["minimal_workflow"] = floor
    res["events_per_job"] = round(total, 2)
    res["events_per_job_over_minimal"] = round(total / floor["events"], 3)
    print(f"{path}: {res['jobs']} jobs in {res['run_s']} s")
    print(f"  {'per job (median)':18s} " + "  ".join(f"{k} {v:g}" for k, v in job.items()))
    print(f"  {'minimal workflow':18s} " + "  ".join(f"{k} {v:g}" for k, v in floor.items()))
    print(f"  events per job (own + scheduler + cluster shares) {total:.1f} over minimal "
          f"{floor['events']:g}: {res['events_per_job_over_minimal']:.2f}")


def record(path: str, res: dict[str, Any]) -> Path:
    """Merge ``temporal_cost.paths.<path>`` into bench/results/latest.json, keeping the rest
    of ``temporal_cost`` (the local figures of issue #29's cuts)."""
    latest = RESULTS / "latest.json"
    current = json.loads(latest.read_text()) if latest.exists() else {}
    mine = (current.get("benchmarks") or {}).get("temporal_cost") or {}
    mine.setdefault("paths", {})[path] = res
    if path == "local":  # issue #29's events_per_job_over_minimal: a local one-replica job
        mine["events_per_job_over_minimal"] = res["events_per_job_over_minimal"]
    return write_result("temporal_cost", mine)


async def main(args: argparse.Namespace, path: str, bed: Bed, tmp: Path,
               procs: list[Any]) -> None:
    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    bench = Bench(store, client, tmp / "clusters", stack_pids(procs))
    try:
        res = await count_path(client, bench, path, bed, args)
        report(path, res, per_item(await minimal(client, args.jobs)))
        print(f"results: {record(path, res)}")
    finally:
        await stop_stack(procs, tmp)


def run_path(args: argparse.Namespace, path: str) -> None:
    """A private stack (``--spawn``) and this path's bed, the count, both stopped."""
    workdir = Path(tempfile.mkdtemp(prefix="skyshift-cost-"))
    with BEDS[path](workdir) as bed:
        spawned = spawn(workdir)[1] if args.spawn else []
        asyncio.run(main(args, path, bed, workdir, spawned))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spawn", action="store_true", help="run a private stack (one per path)")
    ap.add_argument("--path", choices=[*PATHS, "all"], default="local")
    ap.add_argument("--jobs", type=int, default=None,
                    help="jobs per path (default: 30, SkyPilot 4)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--dump", action="store_true",
                    help="print one job's history, the cluster's and the scheduler's")
    arguments = ap.parse_args()
    for which in PATHS if arguments.path == "all" else [arguments.path]:
        arguments_for = argparse.Namespace(**vars(arguments))
        if arguments.jobs is None:
            arguments_for.jobs = 4 if which == "skypilot" else 30
        run_path(arguments_for, which)
