"""Temporal's work per job, counted from the histories: ``python bench/temporal_cost.py --spawn``.

Runs ``--jobs`` one-replica jobs (``true``, restartPolicy Never) on a local cluster to Succeeded,
a few at a time, then reads every job workflow's history and the scheduler workflow's, and counts
per job: history events (all of them, and those until the workflow task that recorded Running),
workflow tasks, regular activities, local activities, signals received and sent, and search
attribute upserts. The scheduler's events are shared by the jobs it placed, so its count is
divided among them. The same counts are taken for the minimal workflow (three regular no-op
activities): ``events_per_job_over_minimal`` is the job's events (its own plus its share of the
scheduler's) over the minimal workflow's. ``--dump`` prints one job's history and the
scheduler's, event by event. Only the local path is counted here; Slurm, Kubernetes, Ray and
SkyPilot need their test beds (see bench/slurm.py, bench/k8s_scale.py, bench/provision.py).

Prints a table and writes ``temporal_cost`` to bench/results/latest.json. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import write_result
from bench.lifecycle import NS, Bench, Minimal, noop, spawn, stack_pids, stop_stack
from skyshift.config import Settings
from skyshift.contract.names import PHASE, SCHEDULER_ID
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


def shows_running(event: Any) -> bool:
    """The upsert that sets SkyShiftPhase to Running: the job's workflow knows it runs."""
    if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        return False
    fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
    phase = fields.indexed_fields.get(PHASE.name)
    return phase is not None and phase.data == b'"Running"'


async def counts(client: Client, workflow_id: str, run_id: str | None = None) -> dict[str, int]:
    """Events of one workflow, every run of it (continue-as-new included), by kind; for a job
    also ``events_to_running``: its events up to the workflow task that recorded Running."""
    out: collections.Counter[str] = collections.Counter()
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        out["events"] += 1
        for name, kind in KINDS.items():
            if event.event_type == kind:
                out[name] += 1
        if shows_running(event) and "events_to_running" not in out:
            out["events_to_running"] = out["events"]
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
        print(f"  {event.event_id:4d} {name}")


async def scheduler_runs(client: Client) -> list[dict[str, int]]:
    """Every run of the scheduler workflow (it continues as new), counted."""
    runs = []
    async for wf in client.list_workflows(f"WorkflowId = '{SCHEDULER_ID}'"):
        runs.append(await counts(client, wf.id, wf.run_id))
    return runs


async def minimal(client: Client, n: int) -> list[dict[str, int]]:
    queue = f"bench-minimal-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=[Minimal], activities=[noop]):
        handles = await asyncio.gather(*(
            client.start_workflow(Minimal.run, i, id=f"{queue}-{i}", task_queue=queue)
            for i in range(n)))
        await asyncio.gather(*(h.result() for h in handles))
    return [await counts(client, h.id) for h in handles]


async def run_jobs(bench: Bench, n: int, concurrency: int) -> list[str]:
    names = [f"cost-{i}" for i in range(n)]
    sem = asyncio.Semaphore(concurrency)

    async def one(name: str) -> None:
        async with sem:
            await bench.submit(name, "true")
            while ((await bench.store.get("jobs", name, NS)).get("status") or {}).get(
                    "phase") != "Succeeded":
                await asyncio.sleep(0.1)

    await asyncio.gather(*(one(nm) for nm in names))
    return names


async def main(args: argparse.Namespace, tmp: Path, procs: list[Any]) -> None:
    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    bench = Bench(store, client, tmp / "clusters", stack_pids(procs))
    try:
        await bench.cluster("cost-local", 1000)
        before = sum(r.get("events", 0) for r in await scheduler_runs(client))
        names = await run_jobs(bench, args.jobs, args.concurrency)
        await asyncio.sleep(2)  # the last workflow tasks after Succeeded (search attributes)
        jobs = [await counts(client, f"job/{NS}/{nm}") for nm in names]
        if args.dump:
            await dump(client, f"job/{NS}/{names[-1]}")
            async for wf in client.list_workflows(f"WorkflowId = '{SCHEDULER_ID}'"):
                await dump(client, wf.id, wf.run_id)
        sched = [r for r in await scheduler_runs(client)]
        sched_total = {k: sum(r.get(k, 0) for r in sched) for k in ["events", *KINDS]}
        sched_total["events"] -= before
        job = per_item(jobs, {f"scheduler_{k}": v for k, v in sched_total.items()}, args.jobs)
        floor = per_item(await minimal(client, args.jobs))
        total = job["events"] + job["scheduler_events"]
        ratio = total / floor["events"]
        print(f"{'per job (median)':24s} " + "  ".join(f"{k} {v:g}" for k, v in job.items()))
        print(f"{'minimal workflow':24s} " + "  ".join(f"{k} {v:g}" for k, v in floor.items()))
        print(f"events per job (own + scheduler share) {total:.1f} over minimal "
              f"{floor['events']:g}: events_per_job_over_minimal {ratio:.2f}")
        path = write_result("temporal_cost", {
            "jobs": args.jobs, "concurrency": args.concurrency, "local_job": job,
            "minimal_workflow": floor, "events_per_job_over_minimal": round(ratio, 3)})
        print(f"results: {path}")
    finally:
        await stop_stack(procs, tmp)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spawn", action="store_true", help="run a private stack")
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--dump", action="store_true",
                    help="print the event types of one job's history and the scheduler's")
    arguments = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="skyshift-cost-"))
    spawned = spawn(workdir)[1] if arguments.spawn else []
    asyncio.run(main(arguments, workdir, spawned))
