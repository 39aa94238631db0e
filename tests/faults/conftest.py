"""Fixtures of the fault-injection suite: real API server processes and resuming watchers.

The scenarios kill and restart processes, so the API server runs as ``python -m skyshift.api``
(the way production runs it) on a fixed loopback port that survives a restart, with its own store
prefix on the etcd it is given and the lifecycle plane off (these scenarios are about the API and
the store; the lifecycle scenarios live next to them once the workflows are done). The helpers
below are what a careful user would run: a watcher that resumes from the last resourceVersion it
saw (as ``skyctl get -w`` does, through the real client) and plain status-code bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyshift.client import AsyncSkyShiftClient
from skyshift.client.errors import ApiError
from tests.fixtures.auth import admin_token
from tests.fixtures.ports import free_port


def fault_seconds(default: float = 60.0) -> float:
    """How long the load scenarios run (``SKYSHIFT_FAULT_SECONDS``; 60 unless told)."""
    value = os.environ.get("SKYSHIFT_FAULT_SECONDS", "")
    return float(value) if value.strip() else default


def job(name: str, **annotations: str) -> dict[str, Any]:
    """A small valid Job manifest."""
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "kind": "Job",
        "metadata": meta,
        "spec": {"image": "alpine", "run": "true", "replicas": 1, "resources": {"cpus": 0.1}},
    }


class ApiProcess:
    """One ``python -m skyshift.api`` on a fixed loopback port; stop, kill and start again.

    Auth is on, as in production: the server writes its signing key and the generated admin
    password under ``home`` at first start, and :attr:`token` is an admin token obtained by
    logging in (as the shared fixtures do for server processes). Replicas given the same
    ``home`` and ``prefix`` share the key, so a token from one is good on the others.
    """

    def __init__(
        self, etcd_endpoint: str, log_dir: Path, prefix: str | None = None,
        home: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.prefix = prefix or f"/fault-{uuid.uuid4().hex[:8]}"
        self.log_path = log_dir / f"api-{self.port}.log"
        self.home = home or log_dir / f"home-{self.prefix.strip('/')}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.token = ""
        self.env = {
            **os.environ,
            "SKYSHIFT_ETCD": etcd_endpoint,
            "SKYSHIFT_STORE_PREFIX": self.prefix,
            "SKYSHIFT_API_HOST": "127.0.0.1",
            "SKYSHIFT_API_PORT": str(self.port),
            "SKYSHIFT_HOME": str(self.home),
            "SKYSHIFT_LIFECYCLE": "off",
            "SKYSHIFT_LOG_LEVEL": "WARNING",
            "SKYSHIFT_API_WATCH_KEEPALIVE": "1",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 30.0, ready: bool = True) -> float:
        """Start and wait for /readyz (``ready``) or /healthz; returns the seconds it took."""
        t0 = time.monotonic()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "skyshift.api"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1
        probe = "/readyz" if ready else "/healthz"
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"API server exited {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(self.url + probe, timeout=1)
                if r.status_code == 200:
                    took = time.monotonic() - t0
                    if not self.token and ready:
                        self.token = admin_token(self.url, self.home)
                    return took
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"API server not ready after {timeout}s:\n{self.log_tail()}")

    @property
    def headers(self) -> dict[str, str]:
        """The bearer header every request of the suite carries."""
        return {"Authorization": f"Bearer {self.token}"}

    def stop(self, timeout: float = 15.0) -> None:
        """Graceful stop (SIGTERM: uvicorn finishes in-flight requests), escalating to SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """``kill -9``: open connections are cut mid-stream."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def server_errors(self) -> list[str]:
        """Log lines of unhandled errors (the API logs every 500 with its traceback)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [ln for ln in text.splitlines() if "unhandled error" in ln or "Traceback" in ln]


@pytest.fixture
def api_process(tmp_path: Path) -> Iterator[Callable[..., ApiProcess]]:
    """``api_process(etcd_endpoint, prefix=None, home=None)``: a started API server process
    with its admin token (stopped after). Pass another process's prefix and home for a replica."""
    procs: list[ApiProcess] = []

    def make(
        etcd_endpoint: str, prefix: str | None = None, home: Path | None = None
    ) -> ApiProcess:
        proc = ApiProcess(etcd_endpoint, tmp_path, prefix, home)
        procs.append(proc)
        proc.start()
        return proc

    yield make
    for proc in procs:
        proc.stop()


@dataclass
class Seen:
    """One watch event as a watcher recorded it."""

    type: str
    name: str
    rv: int
    #: The value of the annotation the watcher was told to note (``note_key``), if any.
    note: str | None = None


@dataclass
class ResumingWatcher:
    """Watches a collection through the real client and resumes where the stream ended.

    Like ``skyctl get -w``: the resourceVersion of the last event seen is passed on every
    reconnect, so the server sends exactly the changes after it. Connection failures and error
    answers (503 while etcd is away, the server down while it restarts) are retried after a short
    pause; every status seen is counted, so a scenario can assert none was a 500.
    """

    server: str
    token: str
    kind: str
    namespace: str | None
    rv: str
    events: list[Seen] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    reconnects: int = 0
    errors: list[str] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    first_event_after: dict[str, float] = field(default_factory=dict)
    marks: dict[str, float] = field(default_factory=dict)
    #: Reconnect delay, as ``skyctl get -w`` waits (RECONNECT_DELAY) before resuming.
    delay: float = 0.2
    #: Annotation whose value each event records (see :attr:`Seen.note`).
    note_key: str | None = None

    def mark(self, label: str) -> None:
        """Remember now; the time of the first event after it goes to ``first_event_after``."""
        self.marks[label] = time.monotonic()

    _task: asyncio.Task[None] | None = None

    def start(self) -> ResumingWatcher:
        self._task = asyncio.create_task(self.run())
        return self

    async def stop(self) -> None:
        """Stop watching (cancels a read that waits for the next event)."""
        self.stopped.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def run(self) -> None:
        async with AsyncSkyShiftClient(self.server, token=self.token, timeout=15) as client:
            while not self.stopped.is_set():
                try:
                    await self._once(client)
                except ApiError as exc:
                    self.statuses[exc.status] += 1
                    self.errors.append(f"{exc.status} {exc.reason}: {exc.message[:120]}")
                    if exc.status == 410:
                        raise  # history compacted: a missed event could not be detected
                self.reconnects += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopped.wait(), self.delay)

    async def _once(self, client: AsyncSkyShiftClient) -> None:
        events = client.watch(self.kind, namespace=self.namespace, resource_version=self.rv)
        try:
            async for ev in events:
                if ev.type == "BOOKMARK":
                    self.rv = ev.resource_version or self.rv
                    continue
                rv = int(ev.resource_version or 0)
                now = time.monotonic()
                for label, t in self.marks.items():
                    if label not in self.first_event_after and now >= t:
                        self.first_event_after[label] = now
                meta = ev.object["metadata"]
                if self.namespace is not None and meta.get("namespace") != self.namespace:
                    self.errors.append(f"event of namespace {meta.get('namespace')}: {meta}")
                note = (meta.get("annotations") or {}).get(self.note_key) if self.note_key else None
                self.events.append(Seen(ev.type, meta["name"], rv, note))
                self.rv = str(rv)
                if self.stopped.is_set():
                    return
            self.statuses[200] += 1
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    async def caught_up(self, rv: int, timeout: float = 30.0) -> None:
        """Wait until an event at or past ``rv`` arrived."""
        deadline = time.monotonic() + timeout
        while int(self.rv) < rv:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"watcher stuck at {self.rv}, expected {rv}; errors {self.errors[-5:]}"
                )
            await asyncio.sleep(0.05)


def assert_exact_sequence(
    seen: list[Seen], expected: list[Seen], ambiguous: set[str] | None = None
) -> tuple[int, int]:
    """Every expected event once, in order, nothing else (except writes of unknown outcome).

    Returns ``(events checked, duplicates)``; duplicates are always a failure.
    """
    rvs = [e.rv for e in seen]
    dupes = len(rvs) - len(set(rvs))
    assert dupes == 0, f"{dupes} events delivered more than once"
    assert rvs == sorted(rvs), "events out of order"
    ambiguous = ambiguous or set()
    extra = [e for e in seen if e.rv not in {x.rv for x in expected}]
    unexplained = [e for e in extra if e.name not in ambiguous]
    assert not unexplained, f"events for writes nobody made: {unexplained[:5]}"
    got = {(e.type, e.name, e.rv) for e in seen}
    missing = [e for e in expected if (e.type, e.name, e.rv) not in got]
    assert not missing, f"{len(missing)} acknowledged writes never arrived: {missing[:5]}"
    return len(seen), dupes


def status_table(title: str, counts: Counter[Any]) -> str:
    parts = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))
    return f"{title}: {parts}"
