"""What the lifecycle fault scenarios share: a stack of their own, jobs that leave a trace, checks.

Each scenario runs the real ``skyshift up`` (etcd, the Temporal dev server on its SQLite file, the
API server with auth on, the control worker and the skylet manager) in a tmp ``SKYSHIFT_HOME`` on
free ports (:func:`tests.fixtures.stack.new_stack`), logs in as the generated admin, and creates
local clusters through the API, each with its own ``state_dir`` and capacity and the label
:data:`FAULT_LABEL`; every job it submits is filtered onto those clusters (the ``local`` cluster
that ``up`` attaches stays out of the way, but is counted by the checks all the same).

A job's replicas run ``echo "$SKYSHIFT_REPLICA $PWD" >> ledger; sleep N`` with two variables of
the scenario: the ledger is the history of every run (which replica, in which cluster's
directory), and ``FAULT_TAG`` lets :func:`census` find every live replica process in ``/proc``.

The checks every scenario ends with (:func:`verify`):

* every job reached the terminal phase it should;
* no replica exists twice: replica directories per (job uid, rank) across the state_dirs of
  every cluster (a restart by policy reuses its directory with a higher attempt), live process
  groups per replica name, and no live process of a finished job;
* each replica ran as many times as the scenario allows (once, unless it failed over);
* etcd agrees with the clusters: each job's ``status.placement`` and ``status.replicaStatus`` are
  what the local adapters report for its uid, per cluster.

Problems are collected, not raised one by one, so a failing scenario still prints its figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from skyshift.compat.local.adapter import LocalManager
from skyshift.devstack import procs
from tests.faults.conftest import fault_seconds
from tests.fixtures.auth import admin_token
from tests.fixtures.stack import DevStack, new_stack, require_stack_binaries

NS = "default"
FAULT_LABEL = {"skyshift-faults": "lifecycle"}
TERMINAL = ("Succeeded", "Failed")
STATES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

__all__ = [
    "FaultStack",
    "Outcome",
    "Progress",
    "census",
    "fault_seconds",
    "finish",
    "jobs_in_flight",
    "secs",
    "two_clusters",
    "until",
    "verify",
]


# ---- the stack ----------------------------------------------------------------------------------


class FaultStack:
    """A ``skyshift up`` stack in ``tmp`` with clusters and jobs made through its API."""

    def __init__(self, tmp: Path, **env: str) -> None:
        require_stack_binaries()
        self.tmp = tmp
        self.stack: DevStack = new_stack(tmp / "home")
        self.stack.extra_env.update({"SKYSHIFT_LOG_LEVEL": "INFO", **env})
        self.tag = uuid.uuid4().hex[:12]
        self.ledger = tmp / "ledger.txt"
        self.ledger.touch()
        #: cluster name -> state_dir (``local`` is the one ``skyshift up`` attached)
        self.state_dirs: dict[str, Path] = {"local": self.stack.home / "clusters" / "local"}
        self.token = ""
        self.http: httpx.AsyncClient | None = None
        self.jobs: dict[str, dict[str, Any]] = {}  # name -> object as created
        self.trackers: list[Progress] = []

    # -- processes --------------------------------------------------------------------------

    async def up(self) -> float:
        """``skyshift up`` (restarts whatever is not running); returns the seconds it took."""
        t0 = time.monotonic()
        res = await asyncio.to_thread(self.stack.run_skyshift, "up")
        assert res.returncode == 0, f"skyshift up failed:\n{res.stdout}\n{res.stderr}"
        return time.monotonic() - t0

    async def restart(self, component: str) -> tuple[float, float]:
        """``skyshift up`` after ``component`` was stopped or killed. Returns (the monotonic time
        ``component`` was first seen healthy again, the seconds ``up`` took): ``up`` also checks
        every other component afterwards, so on a busy machine it returns well after the
        restarted one is back, and recovery is measured from the latter."""
        old = self.pid(component)
        seen: list[float] = []

        async def watch() -> None:
            while not await self._healthy(component, old):
                await asyncio.sleep(0.05)
            seen.append(time.monotonic())

        watcher = asyncio.create_task(watch())
        took = await self.up()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watcher, 5)
        return (seen[0] if seen else time.monotonic()), took

    async def _healthy(self, component: str, old_pid: int) -> bool:
        if component == "etcd":
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=1) as c:
                    r = await c.get(f"{self.stack.etcd_url}/health")
                    return r.status_code == 200 and r.json().get("health") == "true"
            return False
        if component == "temporal":
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.stack.ports["temporal"])
                writer.close()
                return True
            return False
        try:  # the workers write their pid to a ready file once they poll their task queues
            pid = (self.stack.home / "run" / f"{component}.ready").read_text().strip()
        except OSError:
            return False
        return pid.isdigit() and int(pid) != old_pid

    def pid(self, component: str) -> int:
        state = json.loads((self.stack.home / "stack.json").read_text())
        return int(state["components"][component]["pid"])

    async def kill9(self, component: str) -> int:
        """``kill -9`` of the component's process; returns once it is gone."""
        pid = self.pid(component)
        os.kill(pid, signal.SIGKILL)
        await self._gone(pid)
        return pid

    async def stop(self, component: str, grace: float = 15.0) -> str:
        """Stop the component the way ``skyshift down`` does (SIGTERM to its group, SIGKILL after
        ``grace``); returns how it went ("stopped", "killed" or "gone")."""
        pid = self.pid(component)
        how = await asyncio.to_thread(procs.stop_group, pid, grace)
        await self._gone(pid)
        return how

    async def _gone(self, pid: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while procs.alive(pid):
            assert time.monotonic() < deadline, f"pid {pid} still alive"
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> FaultStack:
        try:
            await self.up()
            self.token = await asyncio.to_thread(admin_token, self.stack.api_url, self.stack.home)
        except BaseException:
            await self.__aexit__()
            raise
        self.http = httpx.AsyncClient(
            base_url=self.stack.api_url, timeout=60,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        for tracker in self.trackers:
            await tracker.stop()
        if self.http is not None:
            await self.http.aclose()
        for path in self.state_dirs.values():
            (path / "OFFLINE").unlink(missing_ok=True)
        down = await asyncio.to_thread(self.stack.run_skyshift, "down", "--grace", "5")
        if down.returncode != 0:
            print(f"skyshift down failed: {down.stdout}\n{down.stderr}")
        # replicas are detached from the skylet by design: stop whatever this scenario left
        for pgid in {p.pgid for p in live_processes(self.tag, self.state_dirs)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def started(self, prefix: str = "") -> set[str]:
        """Replica names (starting with ``prefix``) that started at least once (the ledger)."""
        names = (line.partition(" ")[0] for line in self.ledger.read_text().splitlines())
        return {n for n in names if n.startswith(prefix)}

    def running(self, cluster: str | None = None) -> set[str]:
        """Replica names with a live process (in ``cluster``'s directories, if given)."""
        return {p.replica for p in live_processes(self.tag, self.state_dirs)
                if cluster is None or p.cluster == cluster}

    async def wait_started(self, prefix: str, count: int, timeout: float = 90.0) -> float:
        """Wait until ``count`` replicas named ``prefix...`` have started; returns the monotonic
        time it was seen (cheap to poll: the ledger, not the adapters)."""
        deadline = time.monotonic() + timeout
        while len(self.started(prefix)) < count:
            assert time.monotonic() < deadline, (
                f"only {len(self.started(prefix))} of {count} replicas {prefix}* started")
            await asyncio.sleep(0.05)
        return time.monotonic()

    def log_tail(self, component: str, lines: int = 30) -> str:
        return procs.tail(self.stack.home / "logs" / f"{component}.log", lines)

    # -- API --------------------------------------------------------------------------------

    @property
    def api(self) -> httpx.AsyncClient:
        assert self.http is not None, "use FaultStack as an async context manager"
        return self.http

    async def add_cluster(
        self, name: str, cpus: float, memory: float = 16000, labels: dict[str, str] | None = None
    ) -> None:
        state_dir = self.tmp / "clusters" / name
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dirs[name] = state_dir
        manifest = {
            "kind": "Cluster",
            "metadata": {"name": name, "labels": {**FAULT_LABEL, **(labels or {})}},
            "spec": {"manager": "local", "cpus": cpus, "memory": memory,
                     "config": {"state_dir": str(state_dir), "grace_period": 0.5}},
        }
        r = await self.api.post("/clusters", json=manifest)
        assert r.status_code == 201, f"create cluster {name}: {r.status_code} {r.text}"

    async def cluster(self, name: str) -> dict[str, Any] | None:
        with contextlib.suppress(httpx.HTTPError):
            r = await self.api.get(f"/clusters/{name}", timeout=10)
            if r.status_code == 200:
                obj: dict[str, Any] = r.json()
                return obj
        return None

    async def cluster_phase(self, name: str, phase: str, timeout: float = 60.0) -> float:
        """Wait until cluster ``name`` is in ``phase``; returns the monotonic time it was seen."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            last = await self.cluster(name)
            if last and (last.get("status") or {}).get("phase") == phase:
                return time.monotonic()
            await asyncio.sleep(0.2)
        raise AssertionError(f"cluster {name} not {phase} after {timeout:g}s: {last}")

    def job_manifest(
        self, name: str, seconds: float, replicas: int = 1, cpus: float = 0.5,
        restart_policy: str = "OnFailure", prefer: dict[str, str] | None = None,
        gate: str | None = None,
    ) -> dict[str, Any]:
        """A job whose replicas log their run to the ledger, then sleep ``seconds`` and, with a
        ``gate``, wait until the test releases it (:meth:`release`), so they end when the scenario
        needs them to, not when a loaded machine happens to get there; ``prefer`` adds a
        placement preference (weight 10) for clusters with those labels."""
        placement: dict[str, Any] = {"filters": [{"matchLabels": dict(FAULT_LABEL)}]}
        if prefer:
            placement["preferences"] = [{"matchLabels": dict(prefer), "weight": 10}]
        run = f'echo "$SKYSHIFT_REPLICA $PWD" >> "$FAULT_LEDGER"; sleep {seconds:g}'
        if gate is not None:
            run += f'; while [ ! -e "{self.tmp / gate}" ]; do sleep 0.2; done'
        return {
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "image": "alpine",
                "run": run,
                "envs": {"FAULT_TAG": self.tag, "FAULT_LEDGER": str(self.ledger)},
                "replicas": replicas,
                "resources": {"cpus": cpus, "memory": 0},
                "restartPolicy": restart_policy,
                "placement": placement,
            },
        }

    def release(self, gate: str) -> float:
        """Let the replicas waiting on ``gate`` end (within 0.2 s); returns the monotonic time."""
        (self.tmp / gate).touch()
        return time.monotonic()

    async def submit(self, manifest: dict[str, Any]) -> float:
        """POST one job; returns the seconds the answer took."""
        name = manifest["metadata"]["name"]
        t0 = time.monotonic()
        r = await self.api.post(f"/{NS}/jobs", json=manifest)
        assert r.status_code == 201, f"create job {name}: {r.status_code} {r.text}"
        self.jobs[name] = r.json()
        return time.monotonic() - t0

    async def submit_all(
        self, manifests: Iterable[dict[str, Any]], concurrency: int = 8, pace: float = 0.0
    ) -> float:
        """Submit in a burst, ``concurrency`` at a time, starting one every ``pace`` seconds;
        returns the slowest answer's seconds."""
        limit = asyncio.Semaphore(concurrency)

        async def one(i: int, m: dict[str, Any]) -> float:
            await asyncio.sleep(i * pace)
            async with limit:
                return await self.submit(m)

        took = await asyncio.gather(*(one(i, m) for i, m in enumerate(manifests)))
        return max(took, default=0.0)

    async def list_jobs(self) -> dict[str, dict[str, Any]] | None:
        """Every job by name, or None while the API cannot answer (etcd away, say)."""
        try:
            r = await self.api.get(f"/{NS}/jobs", timeout=10)
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        return {o["metadata"]["name"]: o for o in r.json()["items"]}

    async def wait_jobs(
        self, expected: dict[str, str], timeout: float
    ) -> dict[str, dict[str, Any]]:
        """Wait (at most ``timeout`` s) until every job in ``expected`` is terminal; returns the
        jobs as last listed. It does not raise: :func:`verify` reports a job that is not in its
        expected phase together with what the clusters run for it."""
        deadline = time.monotonic() + timeout
        last: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            got = await self.list_jobs()
            if got is not None:
                last = got
                if all(phase_of(got.get(n)) in TERMINAL for n in expected):
                    return got
            await asyncio.sleep(0.5)
        stuck = sorted(n for n in expected if phase_of(last.get(n)) not in TERMINAL)
        print(f"\n{len(stuck)} jobs not terminal after {timeout:g}s: {stuck[:10]}")
        return last


def secs(value: float | None) -> str:
    """A duration for the figures ("never" when it did not happen)."""
    return "never" if value is None else f"{value:.2f}s"


def phase_of(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "?")


# ---- progress, by the test's own clock ----------------------------------------------------------


@dataclass
class Progress:
    """Polls the job list and records every phase change with the time it was first seen."""

    fs: FaultStack
    interval: float = 0.25
    phases: dict[str, str] = field(default_factory=dict)
    changes: list[tuple[float, str, str, str]] = field(default_factory=list)  # t, job, old, new
    failed_polls: int = 0
    _task: asyncio.Task[None] | None = None

    def start(self) -> Progress:
        self._task = asyncio.create_task(self._run())
        self.fs.trackers.append(self)
        return self

    async def stop(self) -> None:
        """Stop polling (after one last look, so what the caller just saw is recorded)."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        await self._poll()

    async def _run(self) -> None:
        while True:
            await self._poll()
            await asyncio.sleep(self.interval)

    async def _poll(self) -> None:
        got = await self.fs.list_jobs()
        now = time.monotonic()
        if got is None:
            self.failed_polls += 1
            return
        for name, obj in got.items():
            new, old = phase_of(obj), self.phases.get(name, "")
            if new != old:
                self.phases[name] = new
                if old:  # a job appearing is not progress
                    self.changes.append((now, name, old, new))

    def histogram(self) -> dict[str, int]:
        return dict(Counter(self.phases.values()))

    def first_change_after(self, t: float, to: Iterable[str] | None = None) -> float | None:
        """Seconds from ``t`` to the first phase change seen after it (into ``to``, if given)."""
        wanted = set(to) if to is not None else None
        for when, _, _, new in self.changes:
            if when > t and (wanted is None or new in wanted):
                return when - t
        return None

    def all_terminal_after(self, t: float, names: Iterable[str]) -> float | None:
        """Seconds from ``t`` until every job in ``names`` was seen terminal (None: not all)."""
        when: dict[str, float] = {}
        for at, name, _, new in self.changes:
            if new in TERMINAL:
                when[name] = at
        names = list(names)
        if not all(n in when for n in names):
            return None
        return max(when[n] for n in names) - t

    def changes_between(self, t0: float, t1: float) -> int:
        return sum(1 for when, *_ in self.changes if t0 < when <= t1)

    async def wait(self, what: str, check: Any, timeout: float) -> float:
        """Poll the synchronous ``check()`` until true; returns the monotonic time it was."""
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting: {what}"
            await asyncio.sleep(0.1)
        return time.monotonic()


# ---- what runs where --------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveProc:
    pid: int
    pgid: int
    replica: str
    job: str
    cluster: str  # from the process's working directory ("?" when outside every state_dir)


def _cluster_of(path: str, state_dirs: dict[str, Path]) -> str:
    for name, d in state_dirs.items():
        if path.startswith(str(d) + os.sep):
            return name
    return "?"


def live_processes(tag: str, state_dirs: dict[str, Path]) -> list[LiveProc]:
    """Every live process of a replica of this scenario (found by ``FAULT_TAG`` in /proc)."""
    out: list[LiveProc] = []
    needle = f"FAULT_TAG={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
            if needle not in raw:
                continue
            stat = (entry / "stat").read_text()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X"):
            continue
        env = dict(kv.split(b"=", 1) for kv in raw.split(b"\0") if b"=" in kv)
        out.append(LiveProc(
            pid=int(entry.name), pgid=int(fields[2]),
            replica=env.get(b"SKYSHIFT_REPLICA", b"?").decode(),
            job=env.get(b"SKYSHIFT_JOB", b"?").decode(),
            cluster=_cluster_of(cwd, state_dirs),
        ))
    return out


@dataclass
class Census:
    """Replicas as the local adapters report them, plus live processes, plus the ledger."""

    #: cluster -> replicas the adapter reports (one per directory with a spec)
    reported: dict[str, list[Any]] = field(default_factory=dict)
    live: list[LiveProc] = field(default_factory=list)
    #: replica name -> clusters it ran in, once per run (from the ledger)
    runs: dict[str, list[str]] = field(default_factory=dict)

    def copies(self) -> dict[tuple[str, int], list[str]]:
        """(job uid, rank) -> the clusters holding a directory of it."""
        out: dict[tuple[str, int], list[str]] = defaultdict(list)
        for cluster, reps in self.reported.items():
            for r in reps:
                out[(r.job_uid, r.rank)].append(cluster)
        return out

    def groups(self) -> dict[str, set[tuple[str, int]]]:
        """replica name -> its live process groups as (cluster, pgid)."""
        out: dict[str, set[tuple[str, int]]] = defaultdict(set)
        for p in self.live:
            out[p.replica].add((p.cluster, p.pgid))
        return out

    def running_on(self, cluster: str) -> set[str]:
        """Replica names with a live process in ``cluster``'s directories."""
        return {p.replica for p in self.live if p.cluster == cluster}


class _Reader(LocalManager):
    """The local adapter, reading its state_dir even while the cluster plays unreachable
    (``OFFLINE`` makes the adapter refuse every call; the test still wants to look)."""

    def _check_online(self) -> None:
        return None


async def census(fs: FaultStack) -> Census:
    c = Census()
    for name, d in fs.state_dirs.items():
        if not (d / "replicas").exists():
            c.reported[name] = []
            continue
        c.reported[name] = await _Reader(name, {"state_dir": str(d), "cpus": 1}).replicas()
    c.live = live_processes(fs.tag, fs.state_dirs)
    for line in fs.ledger.read_text().splitlines():
        replica, _, pwd = line.partition(" ")
        c.runs.setdefault(replica, []).append(_cluster_of(pwd, fs.state_dirs))
    return c


# ---- the final checks -------------------------------------------------------------------------


@dataclass
class Verdict:
    jobs: int = 0
    replicas: int = 0
    duplicates: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"jobs checked {self.jobs}, replicas checked {self.replicas}, duplicates "
                f"{self.duplicates}, problems {len(self.problems)}")


def _norm(counts: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for cluster, c in (counts or {}).items():
        row = {s: int((c or {}).get(s, 0)) for s in STATES}
        if any(row.values()):
            out[cluster] = row
    return out


async def verify(
    fs: FaultStack, jobs: dict[str, dict[str, Any]], expected: dict[str, str],
    max_runs: dict[str, int] | None = None, restarts: bool = False,
) -> tuple[Verdict, Census]:
    """The checks of the module docstring over the jobs in ``expected`` (name -> final phase).

    ``max_runs`` (replica name -> runs) allows a replica to have run more than once (failover
    restarts a moved replica from the beginning elsewhere); every other replica runs once.
    Unless ``restarts``, a job whose status counts a restart is a problem too (the scenarios'
    replicas never fail, so a restart means one was wrongly seen failing).
    """
    v = Verdict()
    c = await census(fs)
    max_runs = max_runs or {}
    by_uid = {str(o["metadata"]["uid"]): n for n, o in fs.jobs.items()}

    per_job: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for cluster, reps in c.reported.items():
        for r in reps:
            per_job[r.job_uid][cluster].append(r)

    # 1. terminal phases
    for name, phase in sorted(expected.items()):
        v.jobs += 1
        obj = jobs.get(name) or {}
        got = phase_of(obj)
        if got != phase:
            there = {cl: [f"{r.name} {r.state} (attempt {r.attempt})" for r in rs]
                     for cl, rs in per_job.get(str((obj.get("metadata") or {}).get("uid")),
                                               {}).items()}
            v.problems.append(f"job {name}: phase {got}, expected {phase}; status "
                              f"{obj.get('status')}; the clusters report {there}")
        if not restarts and (obj.get("status") or {}).get("restarts"):
            v.problems.append(f"job {name} restarted {obj['status']['restarts']} times: "
                              f"{obj['status'].get('message')}")

    # 2. no replica twice: directories per (uid, rank), process groups per name
    for (uid, rank), where in sorted(c.copies().items()):
        if len(where) > 1:
            v.duplicates += 1
            v.problems.append(f"replica {by_uid.get(uid, uid)}/{rank} has a directory on "
                              f"{len(where)} clusters: {sorted(where)}")
    for replica, groups in sorted(c.groups().items()):
        if len(groups) > 1:
            v.duplicates += 1
            v.problems.append(f"replica {replica} runs {len(groups)} times: {sorted(groups)}")
    finished = {n for n in expected if phase_of(jobs.get(n)) in TERMINAL}
    for p in c.live:
        if p.job in finished:
            v.problems.append(f"replica {p.replica} of finished job {p.job} still runs on "
                              f"{p.cluster} (pid {p.pid})")

    # 3. runs per replica (the ledger)
    for replica, where in sorted(c.runs.items()):
        allowed = max_runs.get(replica, 1)
        if len(where) > allowed:
            v.duplicates += 1
            v.problems.append(f"replica {replica} ran {len(where)} times (allowed {allowed}): "
                              f"{where}")

    # 4. etcd agrees with the adapters, job by job
    for name in sorted(expected):
        obj = jobs.get(name) or {}
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        want = int((obj.get("spec") or {}).get("replicas", 1))
        status = obj.get("status") or {}
        held = per_job.get(uid, {})
        v.replicas += sum(len(r) for r in held.values())
        placement = {cl: len(r) for cl, r in held.items()}
        counts = {cl: dict(Counter(x.state for x in r)) for cl, r in held.items()}
        if status.get("placement") != placement:
            v.problems.append(f"job {name}: status.placement {status.get('placement')} but the "
                              f"clusters hold {placement}")
        if _norm(status.get("replicaStatus") or {}) != _norm(counts):
            v.problems.append(f"job {name}: status.replicaStatus "
                              f"{_norm(status.get('replicaStatus') or {})} but the clusters "
                              f"report {_norm(counts)}")
        if expected.get(name) == "Succeeded":
            if sum(placement.values()) != want:
                v.problems.append(f"job {name}: {sum(placement.values())} replicas on the "
                                  f"clusters, spec says {want}")
            counted = sum(sum(row.values()) for row in _norm(status.get("replicaStatus")).values())
            if counted != want:
                v.problems.append(f"job {name}: status.replicaStatus counts {counted} replicas, "
                                  f"spec says {want}")
        for cl, rs in held.items():
            for r in rs:
                ran = c.runs.get(r.name, [])
                if cl not in ran:
                    v.problems.append(f"replica {r.name} on {cl} never ran there (ran: {ran})")
    return v, c


# ---- steps the restart scenarios share ----------------------------------------------------------


async def two_clusters(fs: FaultStack, cpus: int = 4) -> Progress:
    """Local clusters ``fa`` and ``fb`` of ``cpus`` each, both Ready; returns a started
    :class:`Progress` of the jobs."""
    for name in ("fa", "fb"):
        await fs.add_cluster(name, cpus)
    for name in ("fa", "fb"):
        await fs.cluster_phase(name, "Ready")
    return Progress(fs).start()


async def jobs_in_flight(
    fs: FaultStack,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    """On :func:`two_clusters`: twelve jobs (every fourth with two replicas: 15 replicas of 0.5
    cpu) running until the gate ``end-flight`` opens, then four jobs of 1 cpu queued behind them.
    Returns (the running jobs, the queued jobs, the replicas running 2 s after the queued ones
    were submitted)."""
    first = [fs.job_manifest(f"flight-{i:02d}", 1, replicas=2 if i % 4 == 0 else 1,
                             gate="end-flight") for i in range(12)]
    queued = [fs.job_manifest(f"queued-{i}", 3, cpus=1) for i in range(4)]
    await fs.submit_all(first)
    await fs.wait_started("flight-", 15)
    await fs.submit_all(queued)  # 0.5 cpu is left: they wait for the first ones to end
    await asyncio.sleep(2)
    return first, queued, fs.running()


async def until(since: float, seconds: float) -> None:
    """Sleep until ``seconds`` after the monotonic time ``since`` (not at all if that passed)."""
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - since)))


@dataclass
class Outcome:
    """How a scenario ended: what every job should be, and :func:`verify`'s findings."""

    expected: dict[str, str]
    replicas: int
    verdict: Verdict
    census: Census

    def summary(self) -> str:
        runs = sum(map(len, self.census.runs.values()))
        return f"{self.verdict.summary()}; ledger runs {runs}"


async def finish(
    fs: FaultStack, progress: Progress, manifests: list[dict[str, Any]], timeout: float
) -> Outcome:
    """Wait (at most ``timeout`` s) for every job of ``manifests`` to end, stop ``progress`` and
    check that every one Succeeded with :func:`verify`."""
    expected = {m["metadata"]["name"]: "Succeeded" for m in manifests}
    jobs = await fs.wait_jobs(expected, timeout=timeout)
    await progress.stop()
    verdict, c = await verify(fs, jobs, expected)
    replicas = sum(m["spec"]["replicas"] for m in manifests)
    return Outcome(expected, replicas, verdict, c)
