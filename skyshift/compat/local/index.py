"""What the local adapter knows about its replicas, kept current at the cost of what changed.

The skylet asks a cluster for ``replicas()`` and ``state()`` every second and ``submit()`` runs
once per placement; reading every replica's files for each call made all of them cost
O(replicas ever submitted). This index reads everything once (first use after a start, so a
restarted worker re-discovers all), then only what changed:

* ``journal`` (in ``state_dir``): every change made under the adapter's lock (create, new
  attempt, launch, delete) appends the replica's name *after* the change, so another adapter
  instance or process re-reads exactly those replicas. It starts with a random token and is
  started anew (new token) when it grows past ``JOURNAL_MAX``; a reader that sees another token
  compares every replica directory's stamp instead (a ``stat`` each), once.
* The ``replicas/`` directory's stamp: when it changed, its listing finds replicas created or
  removed without the journal (by hand, or by a writer killed between the change and its line).
* A replica whose exit code was recorded is finished for good (only a new attempt or a delete
  changes it, and both are in the journal): its status is served from memory. A running one is
  checked by pid and start time (``/proc/<pid>/stat``), one read per running replica per round;
  pending and lost ones (rare) are re-read.
* A scrub ``stat``\\s up to ``SCRUB`` replica directories per round, round-robin, and re-reads
  those whose stamp moved, so changes that bypassed the journal (files edited by hand, a writer
  killed mid-change) are still seen, within a bounded number of rounds.

A stamp is (inode, mtime, ctime). File times are coarse (a tick), so a change made in the same
tick as the one we saw would leave the stamp unchanged: a stamp younger than ``SETTLE_NS`` is not
trusted, and its directory is listed or re-read again (like git's "racily clean" entries).

Thread-safe (the adapter calls it from worker threads); never holds its mutex while a process is
launched or stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skyshift.compat.local import proc
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec, ReplicaStatus
from skyshift.models.quantity import Resources

SPEC_FILE = "spec.json"
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # DNS-1123 label: a safe dir name
JOURNAL_FILE = "journal"
JOURNAL_MAX = 1 << 20  # bytes (~25,000 changes) before the journal starts anew
SETTLE_NS = 2_000_000_000  # a stamp older than this is exact (covers 1-2 s file time ticks)
SCRUB = 256  # replica directories checked per refresh
_TOKEN_LEN = 33  # 32 hex digits and a newline
Stamp = tuple[int, int, int]


_MICRO = 1_000_000  # usage sums in millionths of a core / of a MB


@dataclass
class Replica:
    spec: ReplicaSpec
    node: str
    path: Path
    ports: dict[int, int] = field(default_factory=dict)  # declared port -> host port


def host_ports(data: dict[str, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in (data.get("ports") or {}).items()}


def load_replica(path: Path) -> Replica | None:
    try:
        data = json.loads((path / SPEC_FILE).read_text())
        return Replica(ReplicaSpec.from_dict(data["spec"]), str(data["node"]), path,
                       host_ports(data))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (ValueError, KeyError, TypeError):
        return None  # not written by us (spec.json is always replaced atomically)


def finished_status(code: int) -> tuple[str, str, str]:
    """(state, reason, message) for an exit code recorded by the wrapper."""
    if code == 0:
        return SUCCEEDED, "Completed", ""
    if code > 128:
        try:
            signame = signal.Signals(code - 128).name
        except ValueError:
            signame = f"signal {code - 128}"
        return FAILED, "Signaled", f"killed by {signame} (exit code {code})"
    return FAILED, "Error", f"exit code {code}"


def read_status(rep: Replica) -> tuple[ReplicaStatus, proc.ProcInfo | None]:
    """The replica's status from its files, and its process when it runs."""
    spec = rep.spec
    status = ReplicaStatus(
        name=spec.name, job_uid=spec.job_uid, namespace=spec.namespace,
        job_name=spec.job_name, rank=spec.rank, state=PENDING, attempt=spec.attempt,
    )
    info = proc.read_pid(rep.path)
    status.started_at = info.started_at if info else None
    if info is not None and proc.alive(info):
        status.state = RUNNING
        return status, info
    ended = proc.read_exit(rep.path)  # read after the liveness check: no race with the end
    if ended is not None:
        status.exit_code, status.finished_at = ended
        status.state, status.reason, status.message = finished_status(ended[0])
    elif info is not None:
        status.state, status.reason = FAILED, "Lost"
        status.message = "the process vanished without recording an exit code"
    return status, None


def _copy(status: ReplicaStatus) -> ReplicaStatus:
    """A shallow copy (half the cost of calling the constructor; a listing makes thousands)."""
    out: ReplicaStatus = object.__new__(ReplicaStatus)
    out.__dict__.update(status.__dict__)
    return out


def _raw(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _stamp(st: os.stat_result, seen_ns: int) -> Stamp | None:
    """The stamp, or None while a later change could still leave it unchanged (``seen_ns``:
    the time just before the ``stat``)."""
    return _raw(st) if seen_ns - st.st_ctime_ns >= SETTLE_NS else None


class Journal:
    """Names of replicas changed under the adapter's lock (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token: bytes | None = None
        self._ino = -1
        self._offset = 0

    def append(self, names: Iterable[str]) -> None:
        """Record changed replicas; the caller holds the adapter's lock."""
        data = "".join(f"{n}\n" for n in names).encode()
        if not data:
            return
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = JOURNAL_MAX
        if size + len(data) > JOURNAL_MAX:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(uuid.uuid4().hex.encode() + b"\n")
            os.replace(tmp, self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def read(self) -> list[str] | None:
        """Names appended since the last read, or None when the journal is not the one read
        last time (started anew, or never read): the caller must then compare everything."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._token is None:
                return []
            self._token, self._ino, self._offset = None, -1, 0
            return None
        if (st.st_ino, st.st_size) == (self._ino, self._offset):
            return []
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            token = os.pread(fd, _TOKEN_LEN, 0)
            same = token == self._token and size >= self._offset
            # a journal we did not follow: only find where its last complete line ends
            start = self._offset if same else max(_TOKEN_LEN, size - 4096)
            data = os.pread(fd, max(0, size - start), start)
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1  # a line being appended is read next time
        self._token, self._ino, self._offset = token, st.st_ino, start + end
        if not same:
            return None
        return [n for n in data[:end].decode(errors="replace").split() if NAME.fullmatch(n)]


@dataclass(frozen=True)
class _Use:
    """What one unfinished replica counts against its node (integer micro-units)."""

    node: str
    cpus: int
    memory: int
    gpus: int
    accelerators: tuple[tuple[str, int], ...]


@dataclass
class _Entry:
    rep: Replica
    status: ReplicaStatus
    info: proc.ProcInfo | None  # the wrapper, while it runs
    stamp: Stamp | None  # of the replica directory when it was read; None: not trusted yet
    final: bool  # finished with a recorded exit code: immutable until the directory changes


class ReplicaIndex:
    """All replicas of one state directory, as last read (see the module docstring)."""

    def __init__(self, replicas_dir: Path, journal: Journal) -> None:
        self._dir = replicas_dir
        self._journal = journal
        self._mu = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._live: set[str] = set()  # entries whose status is not final
        self._names: list[str] | None = None  # sorted names (None: rebuild)
        self._loaded = False
        self._dir_stamp: Stamp | None = None  # replicas/ when last listed
        self._checked = float("-inf")  # monotonic time of the last liveness pass
        self._cursor = 0  # scrub position
        self._counted: dict[str, _Use] = {}  # what each unfinished replica uses
        self._sums: dict[str, list[int]] = {}  # node -> [cpus, memory] micro-units, gpus
        self._accs: dict[str, dict[str, int]] = {}  # node -> accelerator -> count

    # ---- queries (each refreshes first) ---------------------------------------------------

    def listing(self) -> list[ReplicaStatus]:
        """Every replica's status (copies, by name), liveness checked now."""
        with self._mu:
            self._refresh(0.0, scrub=True)
            return [_copy(self._entries[n].status) for n in self._sorted()]

    def usage(self, nodes: Iterable[str], max_age: float) -> dict[str, Resources]:
        """Resources of the unfinished replicas per node, liveness at most ``max_age`` s old."""
        with self._mu:
            self._refresh(max_age, scrub=False)  # listing() scrubs: the skylet calls both
            return self._used(nodes)

    def used(self, nodes: Iterable[str]) -> dict[str, Resources]:
        """Like :meth:`usage`, without a refresh."""
        with self._mu:
            return self._used(nodes)

    def refresh(self, max_age: float, scrub: bool = False) -> bool:
        """Catch up with changes; True when liveness was checked now."""
        with self._mu:
            return self._refresh(max_age, scrub)

    def counted(self, name: str) -> tuple[str, Resources] | None:
        """(node, resources) when the index counts ``name`` as using resources."""
        with self._mu:
            e = self._entries.get(name)
            if e is None or e.status.finished:
                return None
            return e.rep.node, e.rep.spec.resources

    def select(self, names: Iterable[str] | None = None, job_uid: str | None = None
               ) -> list[Replica]:
        """Replicas with one of ``names``, or of job ``job_uid`` (no refresh)."""
        with self._mu:
            if names is not None:
                return [e.rep for n in names if (e := self._entries.get(n)) is not None]
            return [self._entries[n].rep for n in self._sorted()
                    if self._entries[n].rep.spec.job_uid == job_uid]

    def running_with(self, job_uids: set[str]) -> list[Replica]:
        """Running replicas of these jobs, liveness checked now."""
        with self._mu:
            self._refresh(0.0, scrub=False)
            return [e.rep for n in self._sorted() if (e := self._entries[n]).status.state
                    == RUNNING and e.rep.spec.job_uid in job_uids]

    def ports_in_use(self) -> set[int]:
        """Host ports given to replicas that have not finished (no refresh)."""
        with self._mu:
            return {port for e in self._entries.values() if not e.status.finished
                    for port in e.rep.ports.values()}

    # ---- updates after our own changes ----------------------------------------------------

    def reload(self, name: str) -> None:
        with self._mu:
            if self._loaded:
                self._reload(name)

    def drop(self, name: str) -> None:
        with self._mu:
            self._drop(name)

    # ---- internals (self._mu held) --------------------------------------------------------

    def _refresh(self, max_age: float, scrub: bool) -> bool:
        if not self._loaded:
            self._journal.read()  # position first: changes after it come as lines
            self._checked = time.monotonic()  # reading an entry checks its process too
            self._dir_stamp = None
            for name in self._relist():
                self._reload(name)
            self._loaded = True
        else:
            changed = self._journal.read()
            todo = self._relist()
            if changed is None:
                self._compare_all()
            else:
                todo.update(changed)
            for name in sorted(todo):
                self._reload(name)
            if scrub:
                self._scrub()
        if time.monotonic() - self._checked < max_age:
            return False
        self._checked = time.monotonic()
        for name in list(self._live):
            e = self._entries.get(name)
            if e is not None and not (e.info is not None and proc.alive(e.info)):
                self._reload(name)  # ended, pending or lost: read it again
        return True

    def _relist(self) -> set[str]:
        """Names to read: new in ``replicas/`` (drops the ones gone) when it changed."""
        seen = time.time_ns()
        try:
            st = os.stat(self._dir)
            stamp = _stamp(st, seen)
            if stamp is not None and stamp == self._dir_stamp:
                return set()
            listed = set(os.listdir(self._dir))
        except FileNotFoundError:
            stamp, listed = None, set()
        self._dir_stamp = stamp
        for name in self._entries.keys() - listed:
            self._drop(name)
        return listed - self._entries.keys()

    def _compare_all(self) -> None:
        for name in self._sorted():
            self._check_stamp(name)

    def _scrub(self) -> None:
        names = self._sorted()
        count = min(len(names), SCRUB)
        for i in range(count):
            self._check_stamp(names[(self._cursor + i) % len(names)])
        self._cursor = (self._cursor + count) % len(names) if names else 0

    def _check_stamp(self, name: str) -> None:
        e = self._entries.get(name)
        if e is None:
            return
        try:
            unchanged = e.stamp is not None and _raw(os.stat(e.rep.path)) == e.stamp
        except OSError:
            unchanged = False
        if not unchanged:
            self._reload(name)

    def _reload(self, name: str) -> None:
        """Read one replica from its directory again (or forget it when it is gone)."""
        path = self._dir / name
        seen = time.time_ns()
        try:
            st = os.stat(path)
        except OSError:
            self._drop(name)
            return
        rep = load_replica(path)
        if rep is None:
            self._drop(name)
            return
        status, info = read_status(rep)
        final = status.finished and status.exit_code is not None
        if name not in self._entries:
            self._names = None
        self._entries[name] = _Entry(rep, status, info, _stamp(st, seen), final)
        self._count(name)
        if final:
            self._live.discard(name)
        else:
            self._live.add(name)

    def _drop(self, name: str) -> None:
        if self._entries.pop(name, None) is not None:
            self._names = None
            self._count(name)
        if name in self._live:
            self._live.discard(name)

    def _sorted(self) -> list[str]:
        if self._names is None:
            self._names = sorted(self._entries)
        return self._names

    def _count(self, name: str) -> None:
        """Bring the usage sums up to date with entry ``name`` (after it changed or went).

        Kept per change, in integer micro-units, so a submit does not sum every running
        replica again (that made a burst quadratic) and the sums do not depend on the order
        of the changes."""
        e = self._entries.get(name)
        new = None
        if e is not None and not e.status.finished:
            r = e.rep.spec.resources
            new = _Use(e.rep.node, round(r.cpus * _MICRO), round(r.memory * _MICRO), r.gpus,
                       tuple(sorted(r.accelerators.items())))
        old = self._counted.get(name)
        if old == new:
            return
        if old is not None:
            self._add(old, -1)
            del self._counted[name]
        if new is not None:
            self._add(new, 1)
            self._counted[name] = new

    def _add(self, use: _Use, sign: int) -> None:
        acc = self._sums.setdefault(use.node, [0, 0, 0])
        acc[0] += sign * use.cpus
        acc[1] += sign * use.memory
        acc[2] += sign * use.gpus
        if use.accelerators:
            mine = self._accs.setdefault(use.node, {})
            for k, v in use.accelerators:
                mine[k] = mine.get(k, 0) + sign * v
                if not mine[k]:
                    del mine[k]
        if acc == [0, 0, 0] and not self._accs.get(use.node):
            self._sums.pop(use.node, None)
            self._accs.pop(use.node, None)

    def _used(self, nodes: Iterable[str]) -> dict[str, Resources]:
        out = {}
        for node in nodes:
            acc = self._sums.get(node)
            out[node] = Resources() if acc is None else Resources(
                acc[0] / _MICRO, acc[1] / _MICRO, acc[2], dict(self._accs.get(node, {})))
        return out
