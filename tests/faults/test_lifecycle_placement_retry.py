"""Issue 32: Temporal (or the control worker) killed right after a scheduler round told its jobs
their placement, before the round's completion was recorded, in a burst of 60 jobs.

The bug this guards: the retried round decided again from newer capacity, overwrote etcd's
placement with a different cluster, and the cluster the job's replica really ran on then removed
it as "no longer placed here": a job Running for good with no replica anywhere.

Three local clusters (fa 14, fb 10 and fc 6 cpus). Each round first fills fa with three gated
4-cpu jobs (they prefer fa's label) and waits until etcd's capacity counts them, so fb has the
most room; then it submits 60 one-replica jobs of 0.1 cpu that run 15 s, through the API at about
100 per second. The failpoint ``place_batch.signalled`` (skyshift/failpoints.py) is armed as the
burst starts: the next round that has told jobs their placement (fb first) pauses before it
returns; the fillers end, and once etcd shows fa with the most room (:func:`fa_has_most_room`)
the test kills Temporal with SIGKILL (restarted 10 s later by ``skyshift up`` on its SQLite file)
or the control worker (restarted 4 s later). So fa has the most room when Temporal retries the
round: deciding again would now say fa. (Ending the fillers during the outage instead left it to a
race whether the skylet's sync wrote fa's freed capacity before the retry: with the bug, one round
of the Temporal kill passed one time in two.)
The skylets sweep for replicas placed elsewhere every 3 s here (``SKYSHIFT_ORPHAN_SWEEP``; 60 s by
default), while the jobs run: that sweep is how the bug killed a replica. Every job must succeed
with each replica run exactly once on one cluster, and etcd must say where the replicas ran
(:func:`verify`).

One round of 60 jobs per kill kind: the failpoint makes the kill land deterministically in the
first round that told a job its placement (in practice one or two jobs, the burst's first), so
more jobs or rounds only repeat the same check. With ``recorded_decision`` disabled (the retried
round decides again, as before the fix) this single round fails for both kinds: the histories
show the paused round's requests answered ``{fb: 1}`` then ``{fa: 1}``.
``SKYSHIFT_PLACEMENT_FAULT_ROUNDS`` and ``SKYSHIFT_PLACEMENT_FAULT_JOBS`` run more of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from skyshift.contract.names import SIG_PLACED, job_workflow_id
from skyshift.failpoints import ENV, PLACE_BATCH_SIGNALLED
from tests.faults.lifecycle_helpers import (
    NS,
    FaultStack,
    Progress,
    census,
    secs,
    until,
    verify,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

JOBS = int(os.environ.get("SKYSHIFT_PLACEMENT_FAULT_JOBS", "60"))
PACE = 0.01  # seconds between two submissions: about 100 jobs/s
ROUNDS = int(os.environ.get("SKYSHIFT_PLACEMENT_FAULT_ROUNDS", "1"))
OUTAGE = {"temporal": 10.0, "control": 4.0}
# seconds a replica runs: the first ones still run when the skylets' sync loops start again
# after the outage; once the fillers end they all fit at once (30 cpus), so a round drains in one
# wave: the waves of a smaller bed only added their 15 s each, not a check
RUNS_FOR = 15.0
CLUSTERS = (("fa", 14), ("fb", 10), ("fc", 6))
FILLER_CPUS = 4  # three of them leave fa 2 free: fb has the most room until they end
FREED_WITHIN = 15.0  # seconds for etcd to show the fillers (gone; the failpoint pauses 30 s)
HISTORY_READS = 16  # Temporal histories read at once by answers_per_request
LIVE = ("Pending", "Running")
FILL = {"fill": "yes"}  # fa's label: the gated fillers prefer it


async def watch_placements(fs: FaultStack, names: set[str], seen: set[str],
                           stop: asyncio.Event) -> None:
    """Until ``stop``: every second, each job's replicas on a cluster its stored placement does
    not name (what a sweep removes, and what the user is told is not there)."""
    while not stop.is_set():
        # the clusters first: a replica they hold was placed before it was created, so the
        # listing read after them must name its cluster (read before, it may predate both)
        c = await census(fs)
        jobs = await fs.list_jobs()
        for cluster, reps in c.reported.items():
            for rep in reps:
                obj = (jobs or {}).get(rep.job_name)
                if obj is None or rep.job_name not in names or rep.state not in LIVE:
                    continue
                if str(obj["metadata"]["uid"]) != rep.job_uid:
                    continue
                placement = (obj.get("status") or {}).get("placement") or {}
                if cluster not in placement:
                    seen.add(f"job {rep.job_name}: replica {rep.state} on {cluster} while its "
                             f"stored placement is {placement}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def fa_has_most_room(fs: FaultStack, most: bool) -> float:
    """Wait until etcd's allocatable of fa is more than fb's whole capacity (``most``: the
    fillers ended, a round deciding now prefers fa) or not (they run, fb has the most room);
    returns how long that took."""
    t0 = time.monotonic()
    fb_total = dict(CLUSTERS)["fb"]
    cpus = 0.0
    while time.monotonic() - t0 < FREED_WITHIN:
        status = ((await fs.cluster("fa")) or {}).get("status") or {}
        cpus = sum(float(n.get("cpus") or 0) for n in (status.get("allocatable") or {}).values())
        if (cpus > fb_total) == most:
            return time.monotonic() - t0
        await asyncio.sleep(0.1)
    raise AssertionError(f"fa's allocatable still {cpus} cpus after {FREED_WITHIN:g}s")


async def answers_per_request(fs: FaultStack, names: list[str]) -> tuple[int, list[str]]:
    """From the jobs' Temporal histories: how many ``placed`` signals repeated an answer, and the
    requests (job, seq) that were answered twice differently (what the bug did)."""
    client = await Client.connect(fs.stack.temporal_address)
    limit = asyncio.Semaphore(HISTORY_READS)

    async def placed(name: str) -> dict[int, list[dict[str, int]]]:
        answers: dict[int, list[dict[str, int]]] = {}
        async with limit:
            handle = client.get_workflow_handle(job_workflow_id(NS, name))
            async for e in handle.fetch_history_events():
                if not e.HasField("workflow_execution_signaled_event_attributes"):
                    continue
                sig = e.workflow_execution_signaled_event_attributes
                if sig.signal_name != SIG_PLACED:
                    continue
                body = json.loads(sig.input.payloads[0].data)
                answers.setdefault(int(body["seq"]), []).append(body["assignments"])
        return answers

    repeats, different = 0, []
    per_job = await asyncio.gather(*(placed(name) for name in names))
    for name, answers in zip(names, per_job, strict=True):
        for seq, got in answers.items():
            repeats += len(got) - 1
            if any(a != got[0] for a in got):
                different.append(f"job {name}: request {seq} answered {got}")
    return repeats, different


async def one_round(fs: FaultStack, fp: Path, component: str, r: int) -> list[str]:
    """Fill, burst, kill at the failpoint, free, restart, wait, verify; returns the problems."""
    fillers = [fs.job_manifest(f"r{r}-fill-{i}", 0, cpus=FILLER_CPUS, prefer=FILL,
                               gate=f"fill-{r}")
               for i in range(3)]
    await fs.submit_all(fillers)
    await fs.wait_started(f"r{r}-fill-", 3)
    await fa_has_most_room(fs, most=False)  # etcd's capacity counts the fillers
    (fp / f"{PLACE_BATCH_SIGNALLED}.hit").unlink(missing_ok=True)
    (fp / f"{PLACE_BATCH_SIGNALLED}.armed").touch()
    progress = Progress(fs).start()
    burst_jobs = [fs.job_manifest(f"r{r}-{i:03d}", RUNS_FOR, cpus=0.1) for i in range(JOBS)]
    burst = asyncio.create_task(fs.submit_all(burst_jobs, concurrency=8, pace=PACE))
    t0 = time.monotonic()
    hit = fp / f"{PLACE_BATCH_SIGNALLED}.hit"
    while not hit.exists():
        assert time.monotonic() - t0 < 120, "no placement round reached the failpoint"
        await asyncio.sleep(0.02)
    at_hit = time.monotonic() - t0
    fs.release(f"fill-{r}")  # fa has the most room from now on
    freed = await fa_has_most_room(fs, most=True)
    pid = await fs.kill9(component)
    killed = time.monotonic()
    misplaced: set[str] = set()
    done = asyncio.Event()
    names = {m["metadata"]["name"] for m in fillers + burst_jobs}
    watcher = asyncio.create_task(watch_placements(fs, names, misplaced, done))
    submitted = len([m for m in burst_jobs if m["metadata"]["name"] in fs.jobs])
    await until(killed, OUTAGE[component])
    restarted, up_s = await fs.restart(component)
    slowest = await burst
    expected = {m["metadata"]["name"]: "Succeeded" for m in fillers + burst_jobs}
    jobs = await fs.wait_jobs(expected, timeout=300)
    done.set()
    await watcher
    await progress.stop()
    verdict, _ = await verify(fs, jobs, expected)
    verdict.problems += sorted(misplaced)
    repeats, different = await answers_per_request(fs, sorted(expected))
    verdict.problems += different
    print(f"\n[placement-retry {component} #{r}] {JOBS} jobs; the failpoint was hit "
          f"{at_hit:.1f}s into the burst with {submitted} submitted; fa freed in etcd "
          f"{freed:.1f}s later; {component} (pid {pid}) killed, back {restarted - killed:.1f}s "
          f"later (`skyshift up` {up_s:.1f}s); slowest "
          f"create {slowest:.2f}s; all terminal "
          f"{secs(progress.all_terminal_after(restarted, expected))} after the restart")
    print(f"[placement-retry {component} #{r}] {verdict.summary()}; {len(misplaced)} replicas "
          f"seen on a cluster their job's stored placement did not name; {repeats} placements "
          f"told again by a retried round, {len(different)} of them different")
    return verdict.problems


@pytest.mark.parametrize("component", ["temporal", "control"])
async def test_kill_right_after_placements_were_signalled(tmp_path: Path, component: str) -> None:
    fp = tmp_path / "failpoints"
    fp.mkdir()
    (fp / f"{PLACE_BATCH_SIGNALLED}.pause").write_text("30")
    # sweeps every 3 s instead of 60: each runs while this round's replicas do
    async with FaultStack(tmp_path, **{ENV: str(fp), "SKYSHIFT_ORPHAN_SWEEP": "3"}) as fs:
        for name, cpus in CLUSTERS:
            await fs.add_cluster(name, cpus, labels=FILL if name == "fa" else None)
        for name in ("fa", "fb", "fc"):
            await fs.cluster_phase(name, "Ready")
        problems: list[str] = []
        for r in range(ROUNDS):
            problems += [f"round {r}: {p}" for p in await one_round(fs, fp, component, r)]
        assert not problems, "\n".join(problems[:30])
