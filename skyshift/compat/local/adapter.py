"""The ``local`` cluster manager: replicas are processes on this machine.

It is the embedded default cluster of ``skyshift up`` and the reference adapter of the contract
suite, so it behaves like a real cluster where it matters: declared capacity split into nodes,
first-fit placement, idempotent submit by replica name, replicas that survive the worker, and an
unreachable mode for fault-injection.

Each replica is ``/bin/sh -c <run>`` with ``envs`` plus ``SKYSHIFT_JOB``, ``SKYSHIFT_NAMESPACE``,
``SKYSHIFT_RANK`` and ``SKYSHIFT_REPLICA`` (and a few variables such as ``PATH`` and ``HOME``
passed through from the worker; the rest of the worker's environment, which may hold credentials,
is not). With ``run_as`` in the config the command runs as that user, not as the skylet's
(:mod:`skyshift.compat.local.user`); with ``namespace_users`` as well, each namespace runs as a
user of its own and sees only its own processes (:mod:`skyshift.compat.local.tenants`).
There is no container engine here: ``image`` is ignored and resources are accounted, not
enforced. Replicas share the host's ports, so each declared port gets a free host port of its
own, kept for the replica's life: ``SKYSHIFT_PORT_<port>`` (and
``SKYSHIFT_PORT`` for the first one) say which to listen on; services balance over those
(:mod:`skyshift.compat.local.lb`).

State on disk, all under ``state_dir`` (so a new adapter instance, e.g. after a worker restart,
re-discovers everything)::

    replicas/<name>/spec.json   {"spec": ReplicaSpec, "node": node name}
    replicas/<name>/pid         "<pid> <start ticks> <epoch started>" (pid = process group)
    replicas/<name>/log         stdout+stderr of the current attempt (log.<n>: earlier attempts)
    replicas/<name>/exit_code   written by the wrapper when the command ends
    replicas/<name>/work/       the command's working directory (kept across attempts); with
                                ``run_as``, a link to one outside (:mod:`.local_user`)
    replicas/<name>/launch.lock flock held while the replica's process is being started
    OFFLINE                     fault injection: while it exists every call raises
                                Transient("cluster <name> is unreachable"); replicas keep running
    lock                        flock serialising placement, creation and deletion across
                                adapter instances (processes start after it is released)
    journal                     names of replicas changed under the lock, so other instances
                                re-read only those (see :mod:`skyshift.compat.local.index`)

Calls cost what changed, not how many replicas exist: the adapter keeps an index of its replicas
(read once, then kept current through the journal, the ``replicas/`` directory's stamp and a
liveness check of the running ones) and serves ``replicas()``, ``state()`` and placement from it.

States: Pending only while a launch is in progress (or was interrupted by a crash: the next
submit of the same name finishes it), Running, then Succeeded (exit 0) or Failed (exit code kept;
reason "Error", or "Signaled" when killed by a signal). A process that vanished without recording
an exit code is Failed with reason "Lost".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import fcntl
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from skyshift.compat.errors import NotFound, Permanent, Transient, require_running
from skyshift.compat.local import proc
from skyshift.compat.local import user as local_user
from skyshift.compat.local.config import LocalConfig
from skyshift.compat.local.index import (
    JOURNAL_FILE,
    SPEC_FILE,
    Journal,
    ReplicaIndex,
    load_replica,
    read_status,
)
from skyshift.compat.local.index import NAME as _NAME
from skyshift.compat.local.index import Replica as _Replica
from skyshift.compat.local.lb import LocalBalancer
from skyshift.compat.types import (
    PENDING,
    ClusterState,
    ExecResult,
    NodeState,
    ReplicaSpec,
    ReplicaStatus,
    ServiceSpec,
    ServiceStatus,
)
from skyshift.models.quantity import Resources

_PASSTHROUGH = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
# state() and placement reuse a liveness check this recent (replicas() always checks anew;
# a placement that does not fit checks again before it says so)
_LIVENESS_TTL = 0.5
# replicas() and state() run on these threads, not in asyncio's default executor: the skylet runs
# many submits at once, each waiting there for the lock while a launch takes tens of ms, and the
# sync loop's calls (served from the index in a few ms) must not queue behind them
_READERS = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="skyshift-local")
T = TypeVar("T")


async def _read(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(_READERS, fn, *args)


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
        self._journal = Journal(root / JOURNAL_FILE)
        self._index = ReplicaIndex(self._replicas, self._journal)
        self._nodes = dict(
            zip(self.config.node_names(name), self.config.node_capacity(), strict=True)
        )
        user = local_user.resolve(name, self.config.run_as, self.config.namespace_users)
        self._user = user if user is not None and user.drop else None  # None: run as we are
        self._work_root = self.config.work_root or local_user.default_work_root(name, root)
        self._prepared = False

    # ---- ClusterManager -------------------------------------------------------------------

    async def identity(self) -> str:
        """This machine and the state directory: two local clusters sharing one state_dir
        would each see (and sweep) the other's replicas."""
        return f"local:{socket.gethostname()}:{os.path.realpath(self.config.state_dir)}"

    async def connect(self) -> None:
        self._check_online()
        with _io_errors(self.name):
            await asyncio.to_thread(self._setup)
            # replicas whose delete was interrupted by a crash: finish the job
            leftovers = await asyncio.to_thread(lambda: sorted(self._trash.iterdir()))
            await self._dispose(leftovers)
            await asyncio.to_thread(self._index.refresh, _LIVENESS_TTL)  # read every replica

    async def close(self) -> None:
        return None

    async def state(self) -> ClusterState:
        self._check_online()
        with _io_errors(self.name):
            used = await _read(self._index.usage, self._nodes, _LIVENESS_TTL)
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
            return await _read(self._index.listing)

    async def delete(self, names: list[str]) -> None:
        self._check_online()
        wanted = set(names)
        with _io_errors(self.name):
            moved = await asyncio.to_thread(self._detach, wanted, None)
            await self._dispose(list(moved.values()))

    async def delete_job(self, job_uid: str) -> list[str]:
        self._check_online()
        with _io_errors(self.name):
            moved = await asyncio.to_thread(self._detach, None, job_uid)
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
        require_running(name, status)
        cwd, env, argv = rep.path / proc.WORK_DIR, self._env(rep.spec), list(command)
        if self._user is not None:  # as the replica's user, with its private /proc
            user = await asyncio.to_thread(self._user.for_namespace, rep.spec.namespace)
            cwd = cwd.resolve()
            env, argv = user.env(env, cwd), user.command(argv)
        try:
            child = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
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
        if self._user is not None and not self._prepared:
            local_user.prepare(self.name, self._user, self.config.state_dir, self._work_root)
            self._prepared = True

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive across threads and processes (each call opens its own file description)."""
        with self._lockfile.open("a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def _validate(self, spec: ReplicaSpec) -> None:
        if not _NAME.fullmatch(spec.name):
            raise Permanent(f"invalid replica name {spec.name!r}: must be a DNS-1123 label")
        if spec.rank < 0 or spec.attempt < 0:
            raise Permanent(f"replica {spec.name}: rank and attempt must be >= 0")
        for what, value in (("namespace", spec.namespace), ("job name", spec.job_name)):
            if not _NAME.fullmatch(value):  # both are in the replica's files and environment
                raise Permanent(f"replica {spec.name}: invalid {what} {value[:80]!r}")
        if not all(1 <= p <= 65535 for p in spec.ports):
            raise Permanent(f"replica {spec.name}: a port is out of range 1-65535")
        for key, value in spec.envs.items():
            if not key or "=" in key or "\0" in key or "\0" in str(value):
                raise Permanent(f"replica {spec.name}: invalid environment variable {key!r}")

    def _env(self, spec: ReplicaSpec, ports: dict[int, int] | None = None) -> dict[str, str]:
        env = {k: v for k in _PASSTHROUGH if (v := os.environ.get(k)) is not None}
        env.setdefault("PATH", os.defpath)
        env.update({str(k): str(v) for k, v in spec.envs.items()})
        env.update(
            SKYSHIFT_JOB=spec.job_name,
            SKYSHIFT_NAMESPACE=spec.namespace,
            SKYSHIFT_RANK=str(spec.rank),
            SKYSHIFT_REPLICA=spec.name,
        )
        for i, declared in enumerate(spec.ports):
            if (host := (ports or {}).get(declared)) is not None:
                env[f"SKYSHIFT_PORT_{declared}"] = str(host)
                if i == 0:
                    env["SKYSHIFT_PORT"] = str(host)
        return env

    def _host_ports(self, spec: ReplicaSpec, keep: dict[int, int]) -> dict[int, int]:
        """A free host port per declared port (``keep``: what the replica had already)."""
        if not spec.ports:
            return {}  # most replicas: no need to collect every replica's ports
        taken = self._index.ports_in_use()
        out: dict[int, int] = {}
        for declared in spec.ports:
            if declared in keep:
                out[declared] = keep[declared]
                continue
            for _ in range(20):
                port = proc.free_port()
                if port not in taken and port not in out.values():
                    break
            out[declared] = port
        return out

    async def apply_service(self, spec: ServiceSpec) -> ServiceStatus:
        """A service: HAProxy on its own address in front of ``spec.backends``
        (:mod:`skyshift.compat.local.lb`)."""
        self._check_online()
        return await asyncio.to_thread(self._balancer().apply, spec)

    async def delete_service(self, namespace: str, name: str) -> None:
        self._check_online()
        await asyncio.to_thread(self._balancer().delete, namespace, name)

    async def stop_services(self) -> None:
        """The cluster is being deleted: stop its HAProxy and forget its services."""
        await asyncio.to_thread(self._balancer().forget_all)

    def _balancer(self) -> LocalBalancer:
        return LocalBalancer(self.name, self.config.state_dir, self.config.address)

    async def replica_addresses(self, job_uids: list[str], port: int) -> list[str]:
        """``host:port`` of the running replicas of these jobs that serve ``port``."""
        self._check_online()
        with _io_errors(self.name):
            reps = await _read(self._index.running_with, set(job_uids))
        host = self.config.address
        return sorted(f"{host}:{r.ports[port]}" for r in reps if port in r.ports)

    def _get(self, name: str) -> _Replica:
        rep = load_replica(self._replicas / name) if _NAME.fullmatch(name) else None
        if rep is None:
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        return rep

    def _status(self, rep: _Replica) -> ReplicaStatus:
        return read_status(rep)[0]

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
        """Place and create under the cluster lock, start the processes after releasing it (a
        launch takes tens of ms; submits of other replicas go on meanwhile): each replica's own
        launch lock keeps it Pending-and-busy until its process runs."""
        self._setup()
        done: dict[int, ReplicaStatus] = {}
        todo = list(range(len(specs)))
        while todo:
            starts: list[tuple[int, _Replica, int]] = []
            busy: list[int] = []
            error: Exception | None = None
            with self._lock():
                self._index.refresh(_LIVENESS_TTL)  # what other instances did, under the lock
                used = self._index.used(self._nodes)
                for i in todo:
                    try:
                        got = self._prepare(specs[i], used)
                    except Exception as exc:
                        error = exc
                        break
                    finally:  # whatever happened: our index and the other instances read it
                        self._index.reload(specs[i].name)
                        self._journal.append([specs[i].name])
                    if got is None:
                        busy.append(i)
                    elif isinstance(got, ReplicaStatus):
                        done[i] = got
                    else:
                        starts.append((i, *got))
            for i, rep, held in starts:
                try:
                    self._launch(rep)
                    done[i] = self._status(rep)
                except Exception as exc:
                    error = error or exc
                finally:
                    os.close(held)
                    self._index.reload(rep.spec.name)
            if error is not None:
                raise error
            for i in busy:  # another submit is starting it: wait, then look again
                proc.wait_launch(self._replicas / specs[i].name)
            todo = busy
        return [done[i] for i in range(len(specs))]

    def _prepare(self, spec: ReplicaSpec, used: dict[str, Resources]
                 ) -> ReplicaStatus | tuple[_Replica, int] | None:
        """Under the cluster lock: the status of a replica there is nothing to do for, or the
        replica to start with its launch lock held, or None while another submit starts it."""
        path = self._replicas / spec.name
        current = load_replica(path)  # the replica itself is always read from disk
        if current is None and path.exists():  # not ours or half-written: move it out of the way
            self._move_to_trash(path)
        status = self._status(current) if current is not None else None
        self._recount(spec.name, current, status, used)
        if current is not None and status is not None:
            if current.spec.job_uid != spec.job_uid:
                raise Permanent(
                    f"replica name {spec.name} is taken by job uid {current.spec.job_uid}"
                )
            if spec.attempt <= current.spec.attempt:  # a retry: adopt what is there
                if status.state != PENDING:
                    return status
                # being started by another submit, or its launch was interrupted by a crash
                held = proc.hold_launch(path)
                return None if held is None else (current, held)
            # a restart: stop what is left of the old attempt, then run the new one in place
            held = proc.hold_launch(path)
            if held is None:
                return None  # the old attempt is still being started
            try:
                if not status.finished:
                    proc.stop([i for i in [proc.read_pid(path)] if i], self.config.grace_period)
                    if current.node in used:
                        used[current.node] = used[current.node] - current.spec.resources
                node = self._place_checked(spec, used)
                self._retire_attempt(current)
                ports = self._host_ports(spec, current.ports)
                _write_json(path / SPEC_FILE, {"spec": spec.to_dict(), "node": node,
                                               "ports": ports})
            except BaseException:
                os.close(held)
                raise
        else:
            node = self._place_checked(spec, used)
            stage = self._staging / f"{spec.name}.{uuid.uuid4().hex[:8]}"
            stage.mkdir()
            ports = self._host_ports(spec, {})
            _write_json(stage / SPEC_FILE, {"spec": spec.to_dict(), "node": node,
                                            "ports": ports})
            held = proc.hold_launch(stage)  # nobody else knows this directory yet
            assert held is not None
            try:
                os.rename(stage, path)  # atomic: readers see a whole replica or none
            except BaseException:
                os.close(held)
                raise
        used[node] = used[node] + spec.resources
        return _Replica(spec, node, path, ports), held

    def _recount(self, name: str, current: _Replica | None, status: ReplicaStatus | None,
                 used: dict[str, Resources]) -> None:
        """Count ``name`` in ``used`` as it is on disk now, not as the index last saw it."""
        before = self._index.counted(name)
        now = None
        if current is not None and status is not None and not status.finished:
            now = (current.node, current.spec.resources)
        if before == now:
            return
        if before is not None and before[0] in used:
            used[before[0]] = used[before[0]] - before[1]
        if now is not None and now[0] in used:
            used[now[0]] = used[now[0]] + now[1]

    def _place_checked(self, spec: ReplicaSpec, used: dict[str, Resources]) -> str:
        """Place with the index's usage; before saying "does not fit right now" on liveness
        older than a moment, check which replicas still run and try again."""
        try:
            return self._place(spec, used)
        except Transient:
            if not self._index.refresh(0.05):
                raise
        used.update(self._index.used(self._nodes))
        return self._place(spec, used)

    def _retire_attempt(self, rep: _Replica) -> None:
        """Keep the old attempt's log as log.<attempt> and forget its process."""
        log = rep.path / proc.LOG_FILE
        if log.exists():
            os.replace(log, rep.path / f"{proc.LOG_FILE}.{rep.spec.attempt}")
        for f in (proc.PID_FILE, proc.EXIT_FILE):
            (rep.path / f).unlink(missing_ok=True)

    def _launch(self, rep: _Replica) -> None:
        argv, env = ["/bin/sh", "-c", rep.spec.run], self._env(rep.spec, rep.ports)
        if self._user is not None:
            user = self._user.for_namespace(rep.spec.namespace)
            workdir = local_user.ensure_workdir(rep.path, user, self._work_root)
            argv, env = user.command(argv), user.env(env, workdir)
        try:
            proc.launch(rep.path, argv, env)
        except OSError as exc:
            if exc.errno == errno.E2BIG:  # the same spec can never start: no point retrying
                raise Permanent(
                    f"cannot start replica {rep.spec.name}: its command and environment are too "
                    f"big for the kernel ({exc.strerror}); a single env value or run command "
                    "must stay under 128 KiB and all of them together under the system's limit"
                ) from exc
            raise Transient(f"cannot start replica {rep.spec.name}: {exc}") from exc

    def _move_to_trash(self, path: Path) -> Path:
        self._trash.mkdir(parents=True, exist_ok=True)
        target = self._trash / f"{path.name}.{uuid.uuid4().hex[:8]}"
        os.rename(path, target)
        return target

    def _detach(self, names: set[str] | None, job_uid: str | None) -> dict[str, Path]:
        """Atomically take replicas (by name, or all of a job) off the cluster (into trash/);
        name -> new path. A replica being started is taken once its process runs, so that
        process is stopped with the rest."""
        if not self._replicas.exists():
            return {}
        with self._lock():
            self._index.refresh(math.inf)  # what other instances did (no liveness needed)
            moved: dict[str, Path] = {}
            try:
                for rep in self._index.select(sorted(names) if names is not None else None,
                                              job_uid):
                    with contextlib.suppress(FileNotFoundError):  # gone by other means
                        held = proc.hold_launch(rep.path, wait=True)
                        try:
                            moved[rep.spec.name] = self._move_to_trash(rep.path)
                        finally:
                            if held is not None:
                                os.close(held)
                    self._index.drop(rep.spec.name)
            finally:
                self._journal.append(moved)
            return moved

    async def _dispose(self, paths: list[Path]) -> None:
        """Stop the processes of detached replicas, then remove their directories."""
        if not paths:
            return
        infos = [info for p in paths if (info := proc.read_pid(p)) is not None]
        await asyncio.to_thread(proc.stop, infos, self.config.grace_period)
        for p in paths:
            await asyncio.to_thread(local_user.remove_workdir, p)
            await asyncio.to_thread(shutil.rmtree, p, True)
