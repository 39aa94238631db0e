"""The ``local`` cluster manager: replicas are processes on this machine.

It is the embedded default cluster of ``skyshift up`` and the reference adapter of the contract
suite, so it behaves like a real cluster where it matters: declared capacity split into nodes,
first-fit placement, idempotent submit by replica name, replicas that survive the worker, and an
unreachable mode for fault-injection.

Each replica is ``/bin/sh -c <run>`` with ``envs`` plus ``SKYSHIFT_JOB``, ``SKYSHIFT_NAMESPACE``,
``SKYSHIFT_RANK`` and ``SKYSHIFT_REPLICA`` (and a few variables such as ``PATH`` and ``HOME``
passed through from the worker; the rest of the worker's environment, which may hold credentials,
is not). There is no container engine here: ``image`` is ignored, ``ports`` are not mapped (the
process binds host ports itself) and resources are accounted, not enforced.

State on disk, all under ``state_dir`` (so a new adapter instance, e.g. after a worker restart,
re-discovers everything)::

    replicas/<name>/spec.json   {"spec": ReplicaSpec, "node": node name}
    replicas/<name>/pid         "<pid> <start ticks> <epoch started>" (pid = process group)
    replicas/<name>/log         stdout+stderr of the current attempt (log.<n>: earlier attempts)
    replicas/<name>/exit_code   written by the wrapper when the command ends
    replicas/<name>/work/       the command's working directory (kept across attempts)
    OFFLINE                     fault injection: while it exists every call raises
                                Transient("cluster <name> is unreachable"); replicas keep running
    lock                        flock serialising submit/delete across adapter instances

States: Pending only while a launch is in progress (or was interrupted by a crash: the next
submit of the same name finishes it), Running, then Succeeded (exit 0) or Failed (exit code kept;
reason "Error", or "Signaled" when killed by a signal). A process that vanished without recording
an exit code is Failed with reason "Lost".
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyshift.compat import local_proc as proc
from skyshift.compat.errors import NotFound, Permanent, Transient
from skyshift.compat.local_config import LocalConfig
from skyshift.compat.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.quantity import Resources

SPEC_FILE = "spec.json"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # DNS-1123 label: a safe dir name
_PASSTHROUGH = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


@dataclass
class _Replica:
    spec: ReplicaSpec
    node: str
    path: Path


@contextlib.contextmanager
def _io_errors(cluster: str) -> Iterator[None]:
    """Turn filesystem and process errors into compat errors (the cause stays chained)."""
    try:
        yield
    except PermissionError as exc:
        raise Permanent(f"local cluster {cluster}: {exc}") from exc
    except OSError as exc:
        raise Transient(f"local cluster {cluster}: {exc}") from exc


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _finished_status(code: int) -> tuple[str, str, str]:
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


class LocalManager:
    """ClusterManager over local processes (see the module docstring)."""

    manager = "local"

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = LocalConfig.parse(name, config)
        root = self.config.state_dir
        self._replicas = root / "replicas"
        self._trash = root / "trash"
        self._staging = root / "staging"
        self._offline = root / "OFFLINE"
        self._lockfile = root / "lock"
        self._nodes = dict(
            zip(self.config.node_names(name), self.config.node_capacity(), strict=True)
        )

    # ---- ClusterManager -------------------------------------------------------------------

    async def connect(self) -> None:
        self._check_online()
        with _io_errors(self.name):
            await asyncio.to_thread(self._setup)
            # replicas whose delete was interrupted by a crash: finish the job
            leftovers = await asyncio.to_thread(lambda: sorted(self._trash.iterdir()))
            await self._dispose(leftovers)

    async def close(self) -> None:
        return None

    async def state(self) -> ClusterState:
        self._check_online()
        with _io_errors(self.name):
            listing = await asyncio.to_thread(self._listing)
        used = self._usage(listing)
        nodes = [
            NodeState(name=node, capacity=cap, allocatable=cap - used[node])
            for node, cap in self._nodes.items()
        ]
        return ClusterState(healthy=True, nodes=nodes, labels=dict(self.config.labels))

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        self._check_online()
        for spec in replicas:
            self._validate(spec)
        with _io_errors(self.name):
            return await asyncio.to_thread(self._submit_all, replicas)

    async def replicas(self) -> list[ReplicaStatus]:
        self._check_online()
        with _io_errors(self.name):
            listing = await asyncio.to_thread(self._listing)
        return [status for _, status in listing]

    async def delete(self, names: list[str]) -> None:
        self._check_online()
        wanted = set(names)
        with _io_errors(self.name):
            moved = await asyncio.to_thread(self._detach, lambda r: r.spec.name in wanted)
            await self._dispose(list(moved.values()))

    async def delete_job(self, job_uid: str) -> list[str]:
        self._check_online()
        with _io_errors(self.name):
            moved = await asyncio.to_thread(self._detach, lambda r: r.spec.job_uid == job_uid)
            await self._dispose(list(moved.values()))
        return sorted(moved)

    async def logs(self, name: str, tail: int | None = None) -> str:
        self._check_online()
        with _io_errors(self.name):
            rep = await asyncio.to_thread(self._get, name)
            return await asyncio.to_thread(proc.read_log, rep.path, tail)

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        """Run ``command`` (argv, no shell) with the replica's environment in its directory."""
        self._check_online()
        if not command:
            raise Permanent("exec needs a command")
        with _io_errors(self.name):
            rep = await asyncio.to_thread(self._get, name)
            status = await asyncio.to_thread(self._status, rep)
        if status.state != RUNNING:
            raise Permanent(f"replica {name} is {status.state}; exec needs a running replica")
        try:
            child = await asyncio.create_subprocess_exec(
                *command,
                cwd=rep.path / proc.WORK_DIR,
                env=self._env(rep.spec),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:  # like a shell: 127 not found, 126 not executable
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(exit_code=code, stderr=f"{command[0]}: {exc.strerror}\n")
        try:
            out, err = await asyncio.wait_for(child.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            await child.wait()
            raise Transient(f"exec in replica {name} timed out after {timeout:g}s") from None
        code = child.returncode if child.returncode is not None else -1
        return ExecResult(
            exit_code=128 - code if code < 0 else code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
        )

    # ---- helpers --------------------------------------------------------------------------

    def _check_online(self) -> None:
        if self._offline.exists():
            raise Transient(f"cluster {self.name} is unreachable")

    def _setup(self) -> None:
        for d in (self._replicas, self._trash, self._staging):
            d.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive across threads and processes (each call opens its own file description)."""
        with self._lockfile.open("a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def _validate(self, spec: ReplicaSpec) -> None:
        if not _NAME.match(spec.name):
            raise Permanent(f"invalid replica name {spec.name!r}: must be a DNS-1123 label")
        if spec.rank < 0 or spec.attempt < 0:
            raise Permanent(f"replica {spec.name}: rank and attempt must be >= 0")
        for key, value in spec.envs.items():
            if not key or "=" in key or "\0" in key or "\0" in str(value):
                raise Permanent(f"replica {spec.name}: invalid environment variable {key!r}")

    def _env(self, spec: ReplicaSpec) -> dict[str, str]:
        env = {k: v for k in _PASSTHROUGH if (v := os.environ.get(k)) is not None}
        env.setdefault("PATH", os.defpath)
        env.update({str(k): str(v) for k, v in spec.envs.items()})
        env.update(
            SKYSHIFT_JOB=spec.job_name,
            SKYSHIFT_NAMESPACE=spec.namespace,
            SKYSHIFT_RANK=str(spec.rank),
            SKYSHIFT_REPLICA=spec.name,
        )
        return env

    def _load(self, path: Path) -> _Replica | None:
        try:
            data = json.loads((path / SPEC_FILE).read_text())
            return _Replica(ReplicaSpec.from_dict(data["spec"]), str(data["node"]), path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (ValueError, KeyError, TypeError):
            return None  # not written by us (spec.json is always replaced atomically)

    def _get(self, name: str) -> _Replica:
        rep = self._load(self._replicas / name) if _NAME.match(name) else None
        if rep is None:
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        return rep

    def _scan(self) -> list[_Replica]:
        try:
            entries = sorted(os.listdir(self._replicas))
        except FileNotFoundError:
            return []
        return [rep for e in entries if (rep := self._load(self._replicas / e)) is not None]

    def _status(self, rep: _Replica) -> ReplicaStatus:
        spec = rep.spec
        status = ReplicaStatus(
            name=spec.name, job_uid=spec.job_uid, namespace=spec.namespace,
            job_name=spec.job_name, rank=spec.rank, state=PENDING, attempt=spec.attempt,
        )
        info = proc.read_pid(rep.path)
        status.started_at = info.started_at if info else None
        if info is not None and proc.alive(info):
            status.state = RUNNING
            return status
        ended = proc.read_exit(rep.path)  # read after the liveness check: no race with the end
        if ended is not None:
            status.exit_code, status.finished_at = ended
            status.state, status.reason, status.message = _finished_status(ended[0])
        elif info is not None:
            status.state, status.reason = FAILED, "Lost"
            status.message = "the process vanished without recording an exit code"
        return status

    def _listing(self) -> list[tuple[_Replica, ReplicaStatus]]:
        return [(rep, self._status(rep)) for rep in self._scan()]

    def _usage(self, listing: list[tuple[_Replica, ReplicaStatus]]) -> dict[str, Resources]:
        used = {node: Resources() for node in self._nodes}
        for rep, status in listing:
            if not status.finished and rep.node in used:
                used[rep.node] = used[rep.node] + rep.spec.resources
        return used

    def _place(self, spec: ReplicaSpec, used: dict[str, Resources]) -> str:
        """First fit; Transient when it does not fit now, Permanent when it never can."""
        request = spec.resources
        for node, cap in self._nodes.items():
            if request.fits_in(cap - used[node]):
                return node
        sizes = list(self._nodes.values())
        if any(request.fits_in(cap) for cap in sizes):
            free = {n: cap - used[n] for n, cap in self._nodes.items()}
            best = min(free, key=lambda n: len(request.shortfall(free[n])))
            raise Transient(
                f"replica {spec.name} does not fit on cluster {self.name} right now "
                f"(best node {best}: {'; '.join(request.shortfall(free[best]))})"
            )
        raise Permanent(
            f"replica {spec.name} can never fit a node of cluster {self.name} "
            f"({'; '.join(request.shortfall(sizes[0]))})"
        )

    def _submit_all(self, specs: list[ReplicaSpec]) -> list[ReplicaStatus]:
        self._setup()
        with self._lock():
            used = self._usage(self._listing())
            return [self._submit_one(spec, used) for spec in specs]

    def _submit_one(self, spec: ReplicaSpec, used: dict[str, Resources]) -> ReplicaStatus:
        path = self._replicas / spec.name
        current = self._load(path)
        if current is None and path.exists():  # not ours or half-written: move it out of the way
            self._move_to_trash(path)
        if current is not None:
            if current.spec.job_uid != spec.job_uid:
                raise Permanent(
                    f"replica name {spec.name} is taken by job uid {current.spec.job_uid}"
                )
            status = self._status(current)
            if spec.attempt <= current.spec.attempt:  # a retry: adopt what is there
                if status.state == PENDING:  # a launch interrupted by a crash: finish it
                    self._launch(current)
                    return self._status(current)
                return status
            # a restart: stop what is left of the old attempt, then run the new one in place
            if not status.finished:
                proc.stop([i for i in [proc.read_pid(path)] if i], self.config.grace_period)
                if current.node in used:
                    used[current.node] = used[current.node] - current.spec.resources
        node = self._place(spec, used)
        if current is not None:
            self._retire_attempt(current)
            _write_json(path / SPEC_FILE, {"spec": spec.to_dict(), "node": node})
        else:
            stage = self._staging / f"{spec.name}.{uuid.uuid4().hex[:8]}"
            stage.mkdir()
            _write_json(stage / SPEC_FILE, {"spec": spec.to_dict(), "node": node})
            os.rename(stage, path)  # atomic: readers see a whole replica or none
        rep = _Replica(spec, node, path)
        used[node] = used[node] + spec.resources
        self._launch(rep)
        return self._status(rep)

    def _retire_attempt(self, rep: _Replica) -> None:
        """Keep the old attempt's log as log.<attempt> and forget its process."""
        log = rep.path / proc.LOG_FILE
        if log.exists():
            os.replace(log, rep.path / f"{proc.LOG_FILE}.{rep.spec.attempt}")
        for f in (proc.PID_FILE, proc.EXIT_FILE):
            (rep.path / f).unlink(missing_ok=True)

    def _launch(self, rep: _Replica) -> None:
        try:
            proc.launch(rep.path, ["/bin/sh", "-c", rep.spec.run], self._env(rep.spec))
        except OSError as exc:
            raise Transient(f"cannot start replica {rep.spec.name}: {exc}") from exc

    def _move_to_trash(self, path: Path) -> Path:
        self._trash.mkdir(parents=True, exist_ok=True)
        target = self._trash / f"{path.name}.{uuid.uuid4().hex[:8]}"
        os.rename(path, target)
        return target

    def _detach(self, match: Callable[[_Replica], bool]) -> dict[str, Path]:
        """Atomically take matching replicas off the cluster (into trash/); name -> new path."""
        if not self._replicas.exists():
            return {}
        with self._lock():
            return {
                rep.spec.name: self._move_to_trash(rep.path)
                for rep in self._scan()
                if match(rep)
            }

    async def _dispose(self, paths: list[Path]) -> None:
        """Stop the processes of detached replicas, then remove their directories."""
        if not paths:
            return
        infos = [info for p in paths if (info := proc.read_pid(p)) is not None]
        await asyncio.to_thread(proc.stop, infos, self.config.grace_period)
        for p in paths:
            await asyncio.to_thread(shutil.rmtree, p, True)
