"""The long-lived SkyPilot runner process and the calls in flight in it (``client`` uses it).

One :class:`Runner` is one ``runner.py`` process (SkyPilot imported once) serving many
requests at once; its protocol is in ``runner.py``'s docstring. A reader thread routes each
``{"id", "line"}`` to its call's inbox (the caller's thread hands it to that call's
``progress``) and each answer to its call. The process is shared by every client of one
(python, user) in this process (:func:`shared`), held by the clients that used it and ended when
the last one closes.

What keeps a call bounded and the runner from being wedged for good:

- a call waits until its deadline, then is *abandoned*: the runner is told (it cancels the
  read-only SkyPilot requests of that call), its late answer is dropped;
- more than ``MAX_ABANDONED`` abandoned calls still running, or a write to its stdin that does
  not go through by the call's deadline, retire the runner: new calls go to a new one, the old
  one ends once the calls it still serves have answered;
- the runner beats every ``BEAT`` seconds; silent for ``STALL`` seconds while calls wait, it is
  killed (its process group), and so is one that died: its calls get ``gone`` (the client's
  ``Transient``), and the next call starts a new runner.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MARK = "@@skyshift@@"
BEAT = 5.0  # seconds between two beats of a runner
STALL = 60.0  # seconds without a line while calls wait: the runner is wedged, killed
MAX_ABANDONED = 16  # abandoned calls still running in one runner before it is replaced
_MAX_LINE = 64 << 20  # one line (an answer carries clusters' status records)
_GONE_TAIL = 5  # lines of its output an error about a dead runner quotes

Key = tuple[str, int]  # (the venv's python, the uid it runs as; -1: ourselves)


class RunnerGone(Exception):
    """The runner ended (or was retired) before the request reached it: use a new one."""


@dataclass
class Call:
    """One request in flight: what the reader thread routed to it, in order."""

    id: int
    inbox: queue.SimpleQueue[tuple[str, Any]] = field(default_factory=queue.SimpleQueue)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_GONE_TAIL))


class Runner:
    """One runner process and its calls (module docstring)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        # its own process group (killed whole); stderr with stdout: what it says before the
        # protocol starts (setpriv's or python's errors) is quoted if it ends
        pipe, out = subprocess.PIPE, subprocess.STDOUT
        self.proc = subprocess.Popen(
            [*argv, f"{BEAT:g}"],
            stdin=pipe,
            stdout=pipe,
            stderr=out,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._calls: dict[int, Call] = {}
        self._abandoned: set[int] = set()
        self._ids = itertools.count(1)
        self._stray: deque[str] = deque(maxlen=40)  # output no call owns (startup errors)
        self._seen = time.monotonic()
        self.gone: str | None = None  # why it ended, once it has
        self.retired = False
        self._reader = threading.Thread(
            target=self._read, daemon=True, name=f"skypilot-runner-{self.proc.pid}"
        )
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def usable(self) -> bool:
        return self.gone is None and not self.retired

    # ---- calls ----------------------------------------------------------------------------

    def submit(self, request: dict[str, Any], deadline: float) -> Call:
        """Send ``request``; RunnerGone if the runner can no longer take it."""
        with self._lock:
            if self.gone is not None or self.retired:
                raise RunnerGone(self.gone or "retired")
            call = Call(next(self._ids))
            self._calls[call.id] = call
        data = (json.dumps({**request, "id": call.id}) + "\n").encode()
        if not self._write(data, deadline):
            with self._lock:
                self._calls.pop(call.id, None)
            self.end()  # not reading its stdin (or half a request sent): wedged
            self._reader.join(5.0)  # what it said before it ended
            raise RunnerGone(self.gone or "its stdin is closed or full")
        return call

    def wait(self, call: Call, deadline: float, progress: Callable[[str], None]) -> tuple[str, Any]:
        """``("answer", {...})``, ``("gone", why)`` or ``("timeout", None)``; the call's lines
        go to ``progress`` in this thread meanwhile."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            try:
                kind, value = call.inbox.get(timeout=left)
            except queue.Empty:
                return "timeout", None
            if kind != "line":
                return kind, value
            text = str(value).strip()
            if text:
                call.tail.append(text[:500])
                with contextlib.suppress(Exception):
                    progress(text[:500])

    def abandon(self, call: Call) -> None:
        """The caller gave up on ``call`` (its deadline passed)."""
        with self._lock:
            if self._calls.pop(call.id, None) is None:
                return  # answered or gone meanwhile
            self._abandoned.add(call.id)
            too_many = len(self._abandoned) > MAX_ABANDONED
        self._write(
            (json.dumps({"id": call.id, "op": "abandon"}) + "\n").encode(), time.monotonic() + 5.0
        )
        if too_many or self.retired:
            self.retire()  # ends it if this was the last call it served

    def retire(self) -> None:
        """Take no new call; end once the calls in flight have answered."""
        with self._lock:
            self.retired = True
            idle = not self._calls
        if idle:
            self.end()

    def end(self, wait: bool = False) -> None:
        """Kill the runner's group; its calls get ``gone``."""
        self.retired = True
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if wait:
            self.proc.wait()

    def _write(self, data: bytes, deadline: float) -> bool:
        assert self.proc.stdin is not None
        fd = self.proc.stdin.fileno()
        with self._write_lock:
            while data:
                left = deadline - time.monotonic()
                if left <= 0 or self.gone is not None:
                    return False
                try:
                    _, ready, _ = select.select([], [fd], [], min(left, 1.0))
                    if ready:
                        data = data[os.write(fd, data) :]
                except (OSError, ValueError):  # broken pipe, closed
                    return False
        return True

    # ---- the reader thread ----------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                if self.proc.poll() is not None:
                    if not select.select([fd], [], [], 0)[0]:
                        break  # ended, and all it wrote is read (a daemon may hold the pipe)
                else:
                    self._check_stall()
                    continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            self._seen = time.monotonic()
            *lines, buf = (buf + chunk).split(b"\n")
            if len(buf) > _MAX_LINE:
                lines, buf = [*lines, buf[:_MAX_LINE]], b""
            for line in lines:
                self._line(line.decode(errors="replace").rstrip("\r"))
        self._ended()

    def _check_stall(self) -> None:
        with self._lock:
            waiting = bool(self._calls)
        if waiting and time.monotonic() - self._seen > STALL:
            self._stray.append(f"no word from the runner for {STALL:g}s: killed")
            self.end()

    def _line(self, text: str) -> None:
        if not text.startswith(MARK):
            if text.strip():
                self._stray.append(text[-500:])
            return
        try:
            msg = json.loads(text[len(MARK) :])
        except ValueError:
            self._stray.append(text[-500:])
            return
        rid = msg.get("id")
        if "line" in msg:
            with self._lock:
                call = self._calls.get(rid)
            if call is not None:
                call.inbox.put(("line", msg["line"]))
            elif str(msg["line"]).strip():
                self._stray.append(str(msg["line"])[-500:])
        elif "result" in msg or "error" in msg:
            self._answered(rid, msg)

    def _answered(self, rid: Any, msg: dict[str, Any]) -> None:
        with self._lock:
            call = self._calls.pop(rid, None)
            self._abandoned.discard(rid)
            idle = self.retired and not self._calls
        if call is not None:
            call.inbox.put(("answer", msg))
        if idle:
            self.end()

    def _ended(self) -> None:
        code = self.proc.wait()
        with self._lock:
            calls = list(self._calls.values())
            self._calls.clear()
            stray = list(self._stray)
            self.gone = _why(code, stray)
        for call in calls:
            call.inbox.put(("gone", _why(code, [*stray, *call.tail])))
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _why(code: int, said: list[str]) -> str:
    """How a runner ended: its exit status and the last lines it (or the call) printed."""
    last = " | ".join(said[-_GONE_TAIL:])[-1000:]
    return f"exit {code}" + (f": {last}" if last else "")


# ---- one runner per (python, user) in this process ------------------------------------------

_LOCK = threading.Lock()
_SHARED: dict[Key, Runner] = {}
_HOLDS: dict[Key, int] = {}


def shared(key: Key, start: Callable[[], Runner]) -> Runner:
    """The runner serving ``key``: the running one, else a new one from ``start``."""
    with _LOCK:
        runner = _SHARED.get(key)
        if runner is None or not runner.usable():
            runner = _SHARED[key] = start()
        return runner


def hold(key: Key) -> None:
    with _LOCK:
        _HOLDS[key] = _HOLDS.get(key, 0) + 1


def release(key: Key) -> None:
    """One client of ``key`` closed; the last one ends the runner."""
    with _LOCK:
        left = _HOLDS[key] = max(0, _HOLDS.get(key, 0) - 1)
        runner = _SHARED.pop(key, None) if left == 0 else None
    if runner is not None:
        runner.end(wait=True)


def end_shared(key: Key) -> None:
    """End ``key``'s runner now (the next call starts a new one)."""
    with _LOCK:
        runner = _SHARED.pop(key, None)
    if runner is not None:
        runner.end(wait=True)
