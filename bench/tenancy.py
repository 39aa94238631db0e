"""Fair share among tenants, and what quotas cost the scheduler: ``python bench/tenancy.py``.

A simulation of the scheduler's rounds (the pure ``schedule_batch`` the ``place_batch`` activity
runs; no Temporal, etcd or clusters): 10 namespaces with weights 1, 1, 1, 1, 2, 2, 2, 4, 4, 8
each submit 1,000 one-cpu jobs in one cohort, in an interleaved arrival order, onto 2 clusters x
10 nodes x 10 cpus. Each tick, jobs run for 1 to 5 ticks (seeded), then a round places what
fits. While every tenant still has work waiting, a tenant's share is the fraction of the
200 cpus it holds, its target its weight over the sum of weights.

Prints, per mode ("fair": quotas in a cohort, none binding on its own, so only the weighted
dominant-resource ordering decides; "fifo": no quotas, today's priority-then-FIFO):
the largest gap between a tenant's share and its target (median over the ticks and worst), and
the scheduler's CPU per admitted job.

Then, on a private real stack (etcd, Temporal dev server, both workers as subprocesses, as
``bench/lifecycle.py --spawn`` runs them) with one local cluster of 2 cpus: a 2-cpu job of
priority 0 runs, and ``--preempt`` times a 2-cpu job of priority 10 is submitted; each must
evict it. Prints the median and worst time from that submit to its Running (the target: at most
2 s on local clusters). ``--preempt 0`` skips it.

Writes the figures to bench/results/latest.json as ``tenancy``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._util import write_result
from skyshift.models.quantity import Resources
from skyshift.scheduler import ClusterInfo, JobRequest, NodeInfo, schedule_batch
from skyshift.scheduler.quota import QuotaInfo

WEIGHTS = (1, 1, 1, 1, 2, 2, 2, 4, 4, 8)
CLUSTERS, NODES, NODE_CPUS = 2, 10, 10


@dataclass
class Sim:
    fair: bool
    seed: int
    jobs_per_tenant: int
    pending: list[JobRequest] = field(default_factory=list)
    running: list[tuple[int, str, str]] = field(default_factory=list)  # (ends, ns, cluster)
    free: dict[str, float] = field(default_factory=dict)
    gaps: list[float] = field(default_factory=list)
    cpu: float = 0.0
    admitted: int = 0

    def setup(self) -> None:
        rng = random.Random(self.seed)
        order = [(t, i) for t in range(len(WEIGHTS)) for i in range(self.jobs_per_tenant)]
        rng.shuffle(order)
        self.pending = [JobRequest(f"t{t}/j{i}", f"u{t}-{i}", f"t{t}", {}, 0, float(n), 1,
                                   Resources(1, 0)) for n, (t, i) in enumerate(order)]
        self.free = {f"c{c}-n{n}": NODE_CPUS for c in range(CLUSTERS) for n in range(NODES)}
        self.rng = rng

    def clusters(self) -> list[ClusterInfo]:
        return [ClusterInfo(f"c{c}", {}, True, [
            NodeInfo(f"c{c}-n{n}", Resources(self.free[f"c{c}-n{n}"], 1e9))
            for n in range(NODES)]) for c in range(CLUSTERS)]

    def quotas(self) -> list[QuotaInfo]:
        if not self.fair:
            return []
        total = CLUSTERS * NODES * NODE_CPUS
        held = self.held()
        return [QuotaInfo("share", f"t{t}", {"cpus": total}, {"cpus": held.get(f"t{t}", 0)},
                          cohort="all", weight=w) for t, w in enumerate(WEIGHTS)]

    def held(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for _, ns, _ in self.running:
            out[ns] = out.get(ns, 0) + 1
        return out

    def tick(self, now: int) -> None:
        for _, _, node in [r for r in self.running if r[0] <= now]:
            self.free[node] += 1
        self.running = [r for r in self.running if r[0] > now]
        batch, clusters, quotas = self.pending, self.clusters(), self.quotas()
        started = time.process_time()
        decisions = schedule_batch(batch, clusters, [], quotas)
        self.cpu += time.process_time() - started
        left = []
        for job, d in zip(batch, decisions, strict=True):
            if not d.placed:
                left.append(job)
                continue
            node = next(n for n, f in sorted(self.free.items())
                        if n.startswith(next(iter(d.assignments)) + "-") and f >= 1)
            self.free[node] -= 1
            self.running.append((now + self.rng.randint(1, 5), job.namespace, node))
            self.admitted += 1
        self.pending = left
        if all(any(j.namespace == f"t{t}" for j in left) for t in range(len(WEIGHTS))):
            self.gaps.append(self.gap())

    def gap(self) -> float:
        total, held = CLUSTERS * NODES * NODE_CPUS, self.held()
        return max(abs(held.get(f"t{t}", 0) / total - w / sum(WEIGHTS))
                   for t, w in enumerate(WEIGHTS))


def run(fair: bool, jobs: int, seed: int) -> dict[str, float]:
    sim = Sim(fair, seed, jobs)
    sim.setup()
    now = 0
    while sim.pending and now < 100_000:
        sim.tick(now)
        now += 1
    return {
        "share_gap_median_pct": round(100 * statistics.median(sim.gaps or [0.0]), 2),
        "share_gap_worst_pct": round(100 * max(sim.gaps or [0.0]), 2),
        "contended_ticks": len(sim.gaps),
        "scheduler_cpu_us_per_admitted_job": round(1e6 * sim.cpu / max(sim.admitted, 1), 1),
    }


async def submit(store: Any, client: Any, name: str, priority: int, run: str) -> float:
    from skyshift.lifecycle import starter
    from skyshift.models.meta import now_iso

    t0 = time.monotonic()
    obj = await store.create("jobs", {
        "apiVersion": "skyshift.io/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4()),
                     "generation": 1, "creationTimestamp": now_iso(), "labels": {}},
        "spec": {"run": run, "resources": {"cpus": 2, "memory": 0}, "priority": priority,
                 "restartPolicy": "Never"},
        "status": {"phase": "Pending"},
    })
    await starter.ensure_lifecycle(client, obj)
    return t0


async def phase_reached(store: Any, name: str, phase: str, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = await store.get("jobs", name, "default")
        if (obj.get("status") or {}).get("phase") == phase:
            return time.monotonic()
        await asyncio.sleep(0.02)
    raise TimeoutError(f"job {name} not {phase} after {timeout:g} s")


async def preempt_latency(n: int, tmp: Path, procs: list[Any]) -> dict[str, Any]:
    """Submit -> Running of ``n`` high-priority jobs, each evicting the same low one."""
    from bench.lifecycle import Bench, stop_stack
    from skyshift.config import Settings
    from skyshift.lifecycle.client import connect
    from skyshift.store import ObjectStore

    settings = Settings.from_env()
    store = ObjectStore(settings.etcd_endpoints, settings.store_prefix)
    await store.connect()
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    samples = []
    try:
        await Bench(store, client, tmp / "clusters").cluster("preempt-c", 2)
        await submit(store, client, "low", 0, "sleep 3600")
        await phase_reached(store, "low", "Running")
        for i in range(n):
            t0 = await submit(store, client, f"high-{i}", 10, "sleep 1")
            samples.append(await phase_reached(store, f"high-{i}", "Running") - t0)
            await phase_reached(store, f"high-{i}", "Succeeded")
            await phase_reached(store, "low", "Running")  # back, to be evicted again
    finally:
        await stop_stack(procs, tmp)
    return {"n": n, "median_s": round(statistics.median(samples), 2),
            "worst_s": round(max(samples), 2), "samples_s": [round(x, 2) for x in samples]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per tenant")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--preempt", type=int, default=5,
                        help="high-priority jobs that must preempt, timed (0: skip)")
    args = parser.parse_args()
    fair, fifo = run(True, args.jobs, args.seed), run(False, args.jobs, args.seed)
    for name, figures in (("fair", fair), ("fifo", fifo)):
        shown = ", ".join(f"{k} {v}" for k, v in figures.items())
        print(f"{name:5s} {shown}")
    ratio = fair["scheduler_cpu_us_per_admitted_job"] / max(
        fifo["scheduler_cpu_us_per_admitted_job"], 1e-9)
    print(f"scheduler CPU per admitted job, fair over fifo: {ratio:.2f}x")
    out: dict[str, Any] = {"fair": fair, "fifo": fifo,
                           "fair_cpu_per_job_over_fifo": round(ratio, 2),
                           "tenants": len(WEIGHTS), "jobs_per_tenant": args.jobs}
    if args.preempt > 0:
        from bench.lifecycle import spawn

        tmp = Path(tempfile.mkdtemp(prefix="skyshift-bench-"))
        preempt = asyncio.run(preempt_latency(args.preempt, tmp, spawn(tmp)[1]))
        print(f"high-priority submit -> Running when it must preempt, over {preempt['n']}: "
              f"median {preempt['median_s']} s, worst {preempt['worst_s']} s")
        out["preempt_to_running"] = preempt
    path = write_result("tenancy", out)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
