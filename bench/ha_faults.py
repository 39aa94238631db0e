"""Fault suite on the production topology (``skyshift up --ha``): prints figures, asserts nothing.

Brings up ``skyshift up --ha`` (three etcd members, the Temporal server with mTLS, HAProxy before
two API replicas, two control workers, two skylet managers) in a temporary home on free ports, adds
one local cluster, and runs each scenario on a burst of ``--jobs`` jobs submitted through HAProxy:

a. ``etcd``: one etcd member SIGKILLed mid-burst;
b. ``control``: one control worker SIGKILLed mid-burst;
c. ``api``: one API replica SIGKILLed while two clients poll the job list and four watch the
   jobs through HAProxy (a broken watch is resumed from its last resourceVersion; every watcher
   must have seen every job end);
d. ``temporal``: the Temporal server stopped (SIGTERM) and started again by ``skyshift up --ha``;
e. ``rolling``: every SkyShift process (API replicas, control workers, skylet managers) stopped
   and started again by ``up --ha``, one after the other, during a burst spread over minutes.

After each fault ``skyshift up --ha`` restarts whatever is down, so the next scenario starts whole.
Per scenario: jobs Succeeded, lost (never Succeeded), duplicated replicas (a replica that ran
twice: each replica appends its name to a ledger, as the fault tests do), failed HTTP requests
through HAProxy (submissions and the clients' polls; those in flight at the kill counted apart),
seconds from the fault to the first job Succeeded after it and until every job was.

Usage: ``python bench/ha_faults.py --jobs 50`` (500 by default; minutes per scenario on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._util import write_result
from tests.faults.lifecycle_helpers import NS, FaultStack, Progress, census
from tests.fixtures.gobuild import built_binary
from tests.integration.test_devstack_ha import ha_stack

#: the rolling restart's order: the workers first, while the burst's jobs run, then the API
SKYSHIFT_PROCESSES = ["control-1", "control-2", "skylet-manager-1", "skylet-manager-2",
                      "api-1", "api-2"]  # fmt: skip
#: seconds a scenario's burst is spread over (whatever its size): the rolling restart takes
#: minutes, so its jobs are submitted and running while each process restarts
PACE_OVER = {"rolling": 150.0}
#: clients watching the jobs through HAProxy during a scenario (the API replica kill)
WATCHES = {"api": 4}
RETRIES = 20  # a submission that fails is tried again (a 409 then means the first one landed)


@dataclass
class Requests:
    """HTTP requests through HAProxy: (started, ended, why it failed or "") each."""

    log: list[tuple[float, float, str]] = field(default_factory=list)

    def failed(self, fault: float | None = None, gone: float | None = None) -> dict[str, Any]:
        """Failed requests, those in flight at the fault apart (started before the killed
        process was gone, at ``gone``, and ended after the fault: a process killed with SIGKILL
        still accepts connections until the kernel has torn it down), and what they failed
        with."""
        bad = [(s, e, why) for s, e, why in self.log if why]
        late: list[float] = []  # seconds after the fault each failure not in flight started
        in_flight = 0
        if fault is not None:
            until = fault if gone is None else gone
            in_flight = sum(1 for s, e, _ in bad if s <= until and e >= fault)
            late = sorted(round(s - fault, 3) for s, e, _ in bad if s > until or e < fault)
        return {"requests": len(self.log), "failed": len(bad) - in_flight,
                "failed_started_after_s": late, "failed_in_flight": in_flight,
                "failed_with": dict(Counter(why for *_, why in bad))}  # fmt: skip


class HaFaultStack(FaultStack):
    """The fault tests' stack helper on the ``up --ha`` layout."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        env = self.stack.extra_env
        self.stack = ha_stack(tmp / "home")
        server = built_binary("build-temporal.sh", "temporal-server")
        ui = str(Path(server).parent / "temporal-ui-server")  # built by the same script
        self.stack.extra_env.update({**env, "SKYSHIFT_TEMPORAL_SERVER_BIN": server,
                                     "SKYSHIFT_TEMPORAL_UI_BIN": ui})  # fmt: skip
        self.state_dirs = {"local": self.stack.home / "clusters" / "local"}
        self.requests = Requests()

    async def up(self) -> float:
        """``skyshift up --ha`` (restarts whatever is down); returns the seconds it took."""
        t0 = time.monotonic()
        res = await asyncio.to_thread(self.stack.run_skyshift, "up", "--ha", timeout=900)
        assert res.returncode == 0, f"skyshift up --ha failed:\n{res.stdout}\n{res.stderr}"
        return time.monotonic() - t0

    async def timed(self, method: str, url: str, **kw: Any) -> httpx.Response | None:
        """One request, logged; None when it failed (no answer or a 5xx)."""
        t0 = time.monotonic()
        why = ""
        try:
            r = await self.api.request(method, url, timeout=30, **kw)
            if r.status_code >= 500:  # HAProxy's own answer when no replica is up says so
                by = " from HAProxy" if "No server is available" in r.text else ""
                why = f"HTTP {r.status_code}{by}"
        except httpx.HTTPError as e:
            why = type(e).__name__
        why = f"{method} {why}" if why else ""
        self.requests.log.append((t0, time.monotonic(), why))
        return None if why else r

    async def submit(self, manifest: dict[str, Any]) -> float:
        """POST one job, again after a failure; returns the seconds until it was created."""
        name = manifest["metadata"]["name"]
        t0 = time.monotonic()
        for _ in range(RETRIES):
            r = await self.timed("POST", f"/{NS}/jobs", json=manifest)
            if r is not None and r.status_code == 409:
                r = await self.timed("GET", f"/{NS}/jobs/{name}")
            if r is not None and r.status_code in (200, 201):
                self.jobs[name] = r.json()
                return time.monotonic() - t0
            await asyncio.sleep(0.5)
        raise AssertionError(f"job {name} not created after {RETRIES} tries")


async def poll_clients(fs: HaFaultStack, stop: asyncio.Event, clients: int = 2) -> None:
    """``clients`` loops listing the jobs through HAProxy until ``stop``."""

    async def one() -> None:
        while not stop.is_set():
            await fs.timed("GET", f"/{NS}/jobs", params={"limit": 50})
            await asyncio.sleep(0.2)

    await asyncio.gather(*(one() for _ in range(clients)))


@dataclass
class Watcher:
    """A client watching the jobs through HAProxy, as ``skyctl get jobs --watch`` users do: when
    its stream breaks it watches again from the last resourceVersion it saw (after a 410, the
    list's). What it saw last of each job is checked against what happened."""

    fs: HaFaultStack
    phase: dict[str, str] = field(default_factory=dict)
    breaks: int = 0
    rv: str | None = None

    def _see(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if name := meta.get("name"):
            self.phase[name] = str((obj.get("status") or {}).get("phase") or "")
        self.rv = meta.get("resourceVersion") or self.rv

    async def _relist(self) -> None:
        r = await self.fs.api.get(f"/{NS}/jobs", timeout=30)
        r.raise_for_status()
        body = r.json()
        for obj in body.get("objects") or body.get("items") or []:
            self._see(obj)
        self.rv = (body.get("metadata") or {}).get("resourceVersion") or self.rv

    async def _stream(self) -> None:
        params = {"watch": "true", **({"resourceVersion": self.rv} if self.rv else {})}
        async with self.fs.api.stream("GET", f"/{NS}/jobs", params=params,
                                      timeout=httpx.Timeout(30, read=None)) as resp:  # fmt: skip
            if resp.status_code == 410:  # compacted past our version: list, then watch on
                self.rv = None
                await self._relist()
                return
            resp.raise_for_status()
            async for line in resp.aiter_lines():
                if line.strip():
                    event = json.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._see(event.get("object") or {})
                    elif event.get("type") == "BOOKMARK":
                        self.rv = ((event.get("object") or {}).get("metadata") or {}).get(
                            "resourceVersion") or self.rv  # fmt: skip

    async def run(self, stop: asyncio.Event) -> None:
        await self._relist()
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError, ValueError):  # broken: watch again
                await self._stream()
            if not stop.is_set():
                self.breaks += 1
                await asyncio.sleep(0.2)

    def missed(self, expected: dict[str, str]) -> int:
        """Jobs whose last phase this watcher saw is not the one they ended in."""
        return sum(1 for name, phase in expected.items() if self.phase.get(name) != phase)


async def watch_until_seen(
    watchers: list[Watcher], expected: dict[str, str], stop: asyncio.Event,
    tasks: list[asyncio.Task[None]],
) -> dict[str, Any]:  # fmt: skip
    """Give the watchers up to 60 s to see every job's end, stop them; the figures."""
    deadline = time.monotonic() + 60
    while any(w.missed(expected) for w in watchers) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"watches": len(watchers), "watch_breaks": sum(w.breaks for w in watchers),
            "watch_missed": sum(w.missed(expected) for w in watchers)}  # fmt: skip


Fault = Callable[[HaFaultStack], Awaitable[dict[str, Any]]]


async def kill9(component: str, fs: HaFaultStack) -> dict[str, Any]:
    """SIGKILL; returns once the process is gone (``_gone``: when, for :meth:`Requests.failed`)."""
    t0 = time.monotonic()
    await fs.kill9(component)
    gone = time.monotonic()
    return {"fault": f"SIGKILL {component}", "gone_after_s": round(gone - t0, 2), "_gone": gone}


async def restart_temporal(fs: HaFaultStack) -> dict[str, Any]:
    how = await fs.stop("temporal")
    up_s = await fs.up()
    return {"fault": f"temporal {how}, then up --ha", "up_s": round(up_s, 1)}


async def rolling(fs: HaFaultStack) -> dict[str, Any]:
    took = {}
    for name in SKYSHIFT_PROCESSES:
        await fs.stop(name)
        took[name] = round(await fs.up(), 1)
    return {"fault": "each SkyShift process stopped and restarted in turn", "up_s": took}


SCENARIOS: dict[str, Fault] = {
    "etcd": lambda fs: kill9("etcd-1", fs),
    "control": lambda fs: kill9("control-1", fs),
    "api": lambda fs: kill9("api-1", fs),
    "temporal": restart_temporal,
    "rolling": rolling,
}


def duplicated(runs: dict[str, list[str]], prefix: str) -> int:
    """Replicas named ``prefix...`` the ledger shows running more than once."""
    return sum(1 for name, where in runs.items() if name.startswith(prefix) and len(where) > 1)


async def scenario(fs: HaFaultStack, name: str, fault: Fault, n: int) -> dict[str, Any]:
    """A burst of ``n`` jobs with ``fault`` once a third of them are created; the figures."""
    fs.requests = Requests()
    manifests = [fs.job_manifest(f"{name}-{i:04d}", 2, cpus=0.05) for i in range(n)]
    progress = Progress(fs, interval=1.0).start()
    stop = asyncio.Event()
    clients = asyncio.create_task(poll_clients(fs, stop))
    watch_stop = asyncio.Event()
    watchers = [Watcher(fs) for _ in range(WATCHES.get(name, 0))]
    watching = [asyncio.create_task(w.run(watch_stop)) for w in watchers]
    pace = PACE_OVER.get(name, 0.0) / n
    burst = asyncio.create_task(fs.submit_all(manifests, concurrency=8, pace=pace))
    await progress.wait("a third submitted", lambda: sum(
        1 for j in fs.jobs if j.startswith(name)) >= n // 3, timeout=900)  # fmt: skip
    at = time.monotonic()
    detail = await fault(fs)
    gone = detail.pop("_gone", None)
    await burst
    expected = {m["metadata"]["name"]: "Succeeded" for m in manifests}
    jobs = await fs.wait_jobs(expected, timeout=max(300.0, 3.0 * n))
    stop.set()
    await clients
    watched = await watch_until_seen(watchers, expected, watch_stop, watching) if watchers else {}
    await progress.stop()
    runs = (await census(fs)).runs
    succeeded = sum(1 for j in expected if ((jobs.get(j) or {}).get("status") or {}).get(
        "phase") == "Succeeded")  # fmt: skip
    first = progress.first_change_after(at, ("Succeeded",))
    every = progress.all_terminal_after(at, expected)
    restore_s = await fs.up()  # the next scenario starts with every process up
    out = {
        **detail, "jobs": n, "succeeded": succeeded, "lost": n - succeeded,
        "duplicated": duplicated(runs, f"{name}-"), **fs.requests.failed(at, gone),
        "first_succeeded_after_s": None if first is None else round(first, 1),
        "all_succeeded_after_s": None if every is None else round(every, 1),
        "restore_up_s": round(restore_s, 1), **watched,
    }  # fmt: skip
    print(f"[{name}] {out}", flush=True)
    return out


async def main(n: int, only: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {"jobs_per_scenario": n}
    with tempfile.TemporaryDirectory(prefix="skyshift-ha-faults-") as tmp:
        fs = HaFaultStack(Path(tmp))
        async with fs:
            await fs.add_cluster("fa", cpus=4)
            await fs.cluster_phase("fa", "Ready", timeout=300)
            for name in only:
                results[name] = await scenario(fs, name, SCENARIOS[name], n)
                write_result("ha_faults", results)  # what is done survives a later failure
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=500, help="jobs per scenario's burst")
    ap.add_argument("--only", nargs="*", choices=list(SCENARIOS), default=list(SCENARIOS))
    args = ap.parse_args()
    figures = asyncio.run(main(args.jobs, args.only))
    print(f"written to {write_result('ha_faults', figures)}")
