"""The ``slurm`` cluster manager: replicas are Slurm batch jobs, driven by Slurm's own commands.

Commands run locally or on a login node over SSH (``runner``) and their JSON is read by
``parse``; nothing here needs sacct, pyslurm or ``scontrol --json`` (absent in 22.05).

Config (``Cluster.spec.config``)::

    slurm_conf        SLURM_CONF for every command (default: the environment's / Slurm's own)
    partition         partition to submit to and to report capacity of (default: the default one)
    workdir           directory for ``<name>.out`` (stdout+stderr), ``<name>.job`` and
                      ``<name>.exit``; must be shared between the login node and compute nodes;
                      relative paths are under the (remote) home [default .skyshift/slurm/<name>]
    poll_interval     seconds between the skylet's sync rounds on this cluster (each round
                      runs squeue and sinfo; ends and losses are seen that much later), 0.1-300
                      [default: the skylet's interval, 1 s]
    host, username, ssh_key_path, port, known_hosts_file, strict_host_key_checking
                      run everything on ``host`` over key-based SSH (BatchMode, no prompts)
    account, qos, time_limit, sbatch_args   passed to sbatch
    container_runtime ``apptainer`` or ``singularity`` to run ``image`` in a container; without it
                      ``image`` is ignored and the command runs on the node as is (never docker)
    command_timeout   seconds before a Slurm command counts as hung -> Transient [default 60]
    delete_wait       at most this many seconds a delete waits for Slurm to release the
                      cancelled jobs' resources [default 15]
    sbatch_concurrency
                      at most this many sbatch commands at once per cluster [default 8]
    queue_depth       how much work SkyShift may keep waiting in Slurm's queue beyond the free
                      capacity, as a multiple of the partition's usable capacity; every job
                      pending there counts, SkyShift's or not [default 1; 0: never queue]

The queue: ``state()`` reports the requests of the jobs pending in the partition (``squeue``'s
``tres-alloc``) and the bound (``QueueState``), so the scheduler can place a job here although
no node has room yet: Slurm then starts it the moment a job ends, instead of the node idling
for a whole SkyShift round trip (sync, scheduler, submit). What is pending here is counted in the
scheduler's view, so SkyShift never promises more than the free capacity plus the bound.

How replicas map onto Slurm: one batch job per replica, ``--job-name=<replica name>`` and
``--comment=skyshift:v1;uid=..;ns=..;job=..;rank=..;attempt=..`` (the marker: jobs without it are
never listed or touched). The batch script exports the env vars, runs ``/bin/sh -c <run>`` and
writes ``<job id> <exit code> <epoch>`` to ``<name>.exit``; the submit step writes ``<name>.job``
(metadata and job id). ``replicas()`` is one ``squeue`` plus one read of those records: squeue
gives live states, the records keep finished replicas (and their exit codes) after Slurm forgets
them (``MinJobAge``), until ``delete``. So statuses never depend on accounting. The queue is read
as compact text (``squeue``), never ``squeue --json``: that is ~4 KB per job and cannot
be filtered by name in 22.05.

Idempotency: a submit first looks at the records and squeue *for the names it submits*; a
replica with that name and an attempt >= the requested one is adopted, a higher attempt cancels
what is left of the old one and submits again. Submits of different names run side by side (one
lock per name, lookups of concurrent submits shared, at most ``sbatch_concurrency`` sbatch at
once); a delete runs alone (``gate``) but does not hold up ``replicas()``, which leaves
out the names being deleted. ``exec`` runs ``srun --jobid=<id> --overlap`` in
a running replica's allocation (with the env vars read back from its batch script). Slurm has
no services: ``apply_service``/``delete_service`` raise ``Unsupported``, which a Service's
workflow turns into phase Failed with that message. pyslurm is only detected (it would have to
match the cluster's version: PyPI has 17.11, 18.8 and 25.11 only, and this project's test bed is
Debian's 22.05); the command path is always used.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from skyshift.compat.common.fit import check_fits
from skyshift.compat.common.name_locks import NameLocks
from skyshift.compat.errors import NotFound, Permanent, Transient, not_running
from skyshift.compat.slurm.config import SlurmConfig
from skyshift.compat.slurm.gate import Coalescer, Gate
from skyshift.compat.slurm.parse import (
    Outcome,
    Record,
    ReplicaMeta,
    SlurmJob,
    SlurmNode,
    SubmitOptions,
    batch_script,
    classify,
    finished_outcome,
    job_outcome,
    load_json,
    parse_exports,
    parse_job_id,
    parse_nodes,
    parse_partitions,
    parse_records,
    sbatch_args,
    strip_srun_noise,
    validate_spec,
)
from skyshift.compat.slurm.runner import LocalRunner, Result, SshRunner
from skyshift.compat.slurm.squeue import PendingJob, parse_squeue, squeue_argv
from skyshift.compat.types import (
    FAILED,
    PENDING,
    UNKNOWN,
    ClusterState,
    ExecResult,
    NodeState,
    QueueState,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.quantity import Resources

_RECORDS_SH = (
    'cd "$1" 2>/dev/null || exit 0; '
    "find . -maxdepth 1 -type f \\( -name '*.job' -o -name '*.exit' \\) -exec grep -H '' {} +; "
    "exit 0"
)
# the records of the named replicas only (grep -s: a name without records prints nothing)
_NAMED_RECORDS_SH = (
    'cd "$1" 2>/dev/null || exit 0; shift; [ "$#" -gt 0 ] || exit 0; '
    'for n; do set -- "$@" "$n.job" "$n.exit"; shift; done; '
    "grep -sH '' -- \"$@\"; exit 0"
)
# the records of one job's replicas: .job files whose metadata holds "job_uid":"<uid>"
_JOB_RECORDS_SH = (
    'cd "$1" 2>/dev/null || exit 0; '
    'for f in $(grep -lF -- "$2" ./*.job 2>/dev/null); do '
    'n=${f%.job}; grep -sH \'\' -- "$n.job" "$n.exit"; done; exit 0'
)
_SUBMIT_SH = """wd=$1; n=$2; prev=$3; meta=$4; shift 4
mkdir -p "$wd" && cd "$wd" || exit 90
rotated=
if [ -n "$prev" ] && [ -f "$n.out" ]; then mv -f "$n.out" "$n.out.$prev" && rotated=1; fi
out=$(sbatch "$@"); rc=$?
if [ "$rc" -ne 0 ]; then
  if [ -n "$rotated" ]; then mv -f "$n.out.$prev" "$n.out"; fi
  exit "$rc"
fi
id=${out%%;*}
printf '%s\\n%s\\n' "$meta" "$id" > "$n.job.tmp" && mv -f "$n.job.tmp" "$n.job"
printf '%s\\n' "$out"
"""
_RECORD_SH = (
    'cd "$1" && printf \'%s\\n%s\\n\' "$3" "$4" > "$2.job.tmp" && mv -f "$2.job.tmp" "$2.job"'
)
_REMOVE_SH = (
    'cd "$1" 2>/dev/null || exit 0; shift; '
    'for n in "$@"; do rm -f -- "$n.job" "$n.exit" "$n.out" "$n".out.* "$n".exit.*; done'
)
_LOGS_SH = """f="$1/$2.out"
if [ -f "$f" ]; then
  if [ -n "$3" ]; then tail -n "$3" -- "$f"; else cat -- "$f"; fi
  exit $?
fi
[ -f "$1/$2.job" ] && exit 0
exit 44
"""
_RESOLVE_SH = 'cd && mkdir -p -- "$1" && cd -- "$1" && pwd -P'
_LOGS_MISSING = 44


def controller_identity(config_text: str) -> str:
    """``slurm:<ClusterName>@<host>:<port>`` from ``scontrol show config`` output."""
    values: dict[str, str] = {}
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values.setdefault(key.strip(), value.strip())
    host = values.get("SlurmctldHost[0]") or values.get("SlurmctldHost") or values.get(
        "ControlMachine", "")
    host = host.split("(")[0].strip()
    return (f"slurm:{values.get('ClusterName', '')}@{host}:"
            f"{values.get('SlurmctldPort', '')}")


class SlurmManager:
    """ClusterManager over Slurm commands (see the module docstring)."""

    manager = "slurm"

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = SlurmConfig.parse(name, config)
        cfg = self.config
        self.runner: LocalRunner | SshRunner
        if cfg.host:
            self.runner = SshRunner(
                name, cfg.slurm_conf, cfg.host, cfg.username, cfg.ssh_key_path, cfg.port,
                cfg.known_hosts_file, cfg.strict_host_key_checking,
            )
        else:
            self.runner = LocalRunner(name, cfg.slurm_conf)
        self.workdir = cfg.workdir  # made absolute by connect()
        self.partition: str | None = cfg.partition
        self.partitions: list[str] = []
        self.pyslurm_note = ""
        self._connected = False
        self._gate = Gate()  # submits and listings share it; a delete takes it alone
        self._names = NameLocks()  # one submit per replica name at a time
        self._sbatch = asyncio.Semaphore(cfg.sbatch_concurrency)
        self._lookup: Coalescer[tuple[list[SlurmJob], dict[str, Record], int]] = Coalescer(
            self._lookup_names)
        self._nodes_seen: list[SlurmNode] | None = None  # from the last state(), for fit checks
        # names a delete is removing (replicas() leaves them out rather than wait for it), and
        # the listings in progress, each collecting the names hidden while it ran
        self._hidden: Counter[str] = Counter()
        self._listings: list[set[str]] = []
        self._deleted: set[int] = set()  # job ids cancelled by delete(): never listed again

    @property
    def poll_interval(self) -> float | None:
        """Seconds between the skylet's sync rounds here (None: the skylet's own interval)."""
        return self.config.poll_interval

    # ---- ClusterManager -------------------------------------------------------------------

    async def connect(self) -> None:
        if self._connected:
            return
        if isinstance(self.runner, SshRunner):
            self.runner.check_config()
        resolved, parts = await asyncio.gather(
            self._cmd(["sh", "-c", _RESOLVE_SH, "sh", self.config.workdir], what="workdir"),
            self._cmd(["sinfo", "-h", "-o", "%P"]),
        )
        workdir = resolved.strip().splitlines()[-1] if resolved.strip() else ""
        if not workdir.startswith("/"):
            raise Permanent(f"cluster {self.name}: cannot resolve workdir {self.config.workdir}")
        self.workdir = workdir
        self.partitions, default = parse_partitions(parts)
        if self.config.partition and self.config.partition not in self.partitions:
            raise Permanent(
                f"cluster {self.name}: partition {self.config.partition!r} does not exist "
                f"(partitions: {', '.join(self.partitions) or 'none'})"
            )
        self.partition = self.config.partition or default
        self._connected = True

    async def identity(self) -> str:
        """The controller: ClusterName and SlurmctldHost/SlurmctldPort of ``scontrol show
        config``, which every login node and slurm.conf path to one cluster agree on."""
        return controller_identity(await self._cmd(["scontrol", "show", "config"]))

    async def close(self) -> None:
        self._connected = False
        await self.runner.close()

    async def state(self) -> ClusterState:
        await self.connect()
        # The queue is read BEFORE the nodes: a job pending then that starts before sinfo is
        # counted twice (harmless), never in neither. Its own squeue, not the listing's: the
        # sync lists replicas first, and one submitted after the listing's squeue (listed
        # Pending from its record) must be in the queue reported with it.
        pending = await self._pending_jobs() if self.config.queue_depth > 0 else []
        doc = load_json(await self._cmd(["sinfo", "--json"]), f"sinfo on cluster {self.name}")
        self._detect_pyslurm(doc)
        nodes = self._in_partition(parse_nodes(doc))
        self._nodes_seen = nodes
        usable = [n for n in nodes if n.usable]
        bad = [f"{n.name} ({n.state})" for n in nodes if not n.usable]
        message = f"{len(usable)}/{len(nodes)} nodes usable"
        if bad:
            message += f"; unusable: {', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}"
        labels = {"slurm/partition": self.partition or ""} if self.partition else {}
        labels.update(self.config.labels)
        return ClusterState(
            healthy=bool(usable),
            message=message if nodes else f"no nodes in partition {self.partition}",
            nodes=[NodeState(n.name, n.capacity, n.allocatable) for n in nodes],
            labels=labels,
            queue=self._queue(usable, pending) if self.config.queue_depth > 0 else None,
        )

    def _queue(self, usable: list[SlurmNode], pending: list[PendingJob]) -> QueueState:
        """The bound (``queue_depth`` x the usable capacity) and what pends in the partition."""
        depth = self.config.queue_depth
        total = Resources()
        for n in usable:
            total = total + n.capacity
        limit = Resources(total.cpus * depth, total.memory * depth, int(total.gpus * depth),
                          {k: int(v * depth) for k, v in total.accelerators.items()})
        mine = [p for p in pending if self._in_queue(p)]
        queued = Resources()
        for p in mine:
            queued = queued + p.request
        return QueueState(limit, queued, len(mine))

    def _in_queue(self, job: PendingJob) -> bool:
        return not self.partition or not job.partitions or self.partition in job.partitions

    async def _pending_jobs(self) -> list[PendingJob]:
        """Every job pending in Slurm's queue now (anyone's)."""
        text = await self._cmd(squeue_argv(states="PENDING"), what="squeue")
        return parse_squeue(text)[2]

    async def submit(self, replicas: list[ReplicaSpec]) -> list[ReplicaStatus]:
        for spec in replicas:
            validate_spec(spec)
        await self.connect()
        first: dict[str, ReplicaSpec] = {}
        for spec in replicas:  # the same name twice in one batch is submitted once
            first.setdefault(spec.name, spec)
        async with self._gate.shared(), self._names.hold(list(first)):
            nodes = self._nodes_seen if self._nodes_seen is not None else await self._nodes()
            for spec in first.values():
                self._check_fits(spec, nodes)
            jobs, records, max_id = await self._lookup.get(list(first))
            results = await asyncio.gather(
                *(self._submit_one(spec, jobs, records, max_id) for spec in first.values()),
                return_exceptions=True,
            )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        done = {name: r for name, r in zip(first, results, strict=True)
                if isinstance(r, ReplicaStatus)}
        return [done[spec.name] for spec in replicas]

    async def replicas(self) -> list[ReplicaStatus]:
        await self.connect()
        # Not behind the gate: a burst of deletes must not stall the sync's poll (it timed out
        # and marked the cluster Error). Names a delete removed meanwhile are left out instead.
        skip = set(self._hidden)
        self._listings.append(skip)
        try:
            (jobs, max_id), records = await asyncio.gather(self._squeue(), self._records())
        finally:
            self._listings = [s for s in self._listings if s is not skip]
        skip |= set(self._hidden)
        by_name = self._by_name(jobs)
        names = {n for n, r in records.items() if r.meta is not None}
        names |= {n for n, js in by_name.items() if any(j.live for j in js)}
        out = []
        for name in sorted(names - skip):
            status = self._status(name, records.get(name), by_name.get(name, []), max_id)
            if status is not None:
                out.append(status)
        return out

    async def delete(self, names: list[str]) -> None:
        wanted = set(names)
        await self._delete(lambda meta: meta.name in wanted, wanted, None)

    async def delete_job(self, job_uid: str) -> list[str]:
        return await self._delete(lambda meta: meta.job_uid == job_uid, set(), job_uid)

    async def logs(self, name: str, tail: int | None = None) -> str:
        await self.connect()
        arg = "" if tail is None else str(max(0, int(tail)))
        if tail is not None and tail <= 0:
            arg = "0"
        result = await self._run(["sh", "-c", _LOGS_SH, "sh", self.workdir, name, arg])
        if result.rc == 0:
            return result.stdout
        if result.rc == _LOGS_MISSING:
            jobs, _ = await self._squeue(names=[name])
            if any(j.meta.name == name and j.live for j in jobs if j.job_id not in self._deleted):
                return ""
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        raise classify("logs", result.rc, result.stderr, self.name)

    async def exec(self, name: str, command: list[str], timeout: float = 60) -> ExecResult:
        """``srun --jobid=<id> --overlap`` inside the replica's allocation, with its env vars."""
        if not command:
            raise Permanent("exec needs a command")
        await self.connect()
        (jobs, _), records = await asyncio.gather(self._squeue(names=[name]),
                                                  self._records([name]))
        rec = records.get(name)
        job = self._current(rec, self._by_name(jobs).get(name, []))
        if job is None:
            if rec is not None and rec.meta is not None:
                raise Permanent(f"replica {name} has finished; exec needs a running replica")
            raise NotFound(f"replica {name} not found on cluster {self.name}")
        if job.slurm_state != "RUNNING":
            raise not_running(name, job.slurm_state.lower())
        script = await self._run(["scontrol", "write", "batch_script", str(job.job_id), "-"])
        env = [f"{k}={v}" for k, v in parse_exports(script.stdout).items()]
        argv = ["srun", f"--jobid={job.job_id}", "--overlap", "--nodes=1", "--ntasks=1",
                "--quiet", f"--chdir={self.workdir}", "env", *env, *command]
        try:
            result = await self.runner.run(argv, None, timeout)
        except Transient as exc:
            raise Transient(f"exec in replica {name} failed or timed out: {exc}") from exc
        return ExecResult(result.rc, result.stdout, strip_srun_noise(result.stderr))

    # ---- commands -------------------------------------------------------------------------

    async def _run(self, argv: list[str], stdin: bytes | None = None) -> Result:
        return await self.runner.run(argv, stdin, self.config.command_timeout)

    async def _cmd(self, argv: list[str], stdin: bytes | None = None, what: str = "") -> str:
        """Run and return stdout; a failure becomes the matching compat error."""
        result = await self._run(argv, stdin)
        if result.rc != 0:
            raise classify(what or argv[0], result.rc, result.stderr, self.name)
        return result.stdout

    async def _squeue(self, names: list[str] | None = None,
                      ids: list[int] | None = None) -> tuple[list[SlurmJob], int]:
        """SkyShift's jobs (all, or those with these names / ids), and the highest job id
        Slurm showed (any job)."""
        if (ids is not None and not ids) or (names is not None and not names):
            return [], 0
        try:
            text = await self._cmd(squeue_argv(names, ids), what="squeue")
        except NotFound:  # --jobs naming only ids slurmctld no longer holds
            return [], 0
        jobs, max_id, _ = parse_squeue(text)
        if names is None and ids is None:  # forget tombstones of jobs Slurm no longer shows
            self._deleted &= {j.job_id for j in jobs}
        return jobs, max_id

    async def _records(self, names: list[str] | None = None,
                       job_uid: str | None = None) -> dict[str, Record]:
        """Every record in the workdir, or only those of ``names`` / of one job."""
        if job_uid is not None:
            argv = ["sh", "-c", _JOB_RECORDS_SH, "sh", self.workdir, f'"job_uid":"{job_uid}"']
        elif names is None:
            argv = ["sh", "-c", _RECORDS_SH, "sh", self.workdir]
        else:
            argv = ["sh", "-c", _NAMED_RECORDS_SH, "sh", self.workdir, *names]
        return parse_records(await self._cmd(argv, what="read records"))

    async def _lookup_names(self, names: list[str]) -> tuple[list[SlurmJob], dict[str, Record],
                                                             int]:
        """What a submit needs to know about its names. Records are read before the queue, so
        a recorded job squeue does not show has left it (it was not submitted meanwhile)."""
        records = await self._records(names)
        jobs, max_id = await self._squeue(names=names)
        recorded = [r.job_id for r in records.values() if r.job_id is not None]
        return jobs, records, max([max_id, *recorded])

    async def _nodes(self) -> list[SlurmNode]:
        doc = load_json(await self._cmd(["sinfo", "--json"]), f"sinfo on cluster {self.name}")
        return self._in_partition(parse_nodes(doc))

    def _in_partition(self, nodes: list[SlurmNode]) -> list[SlurmNode]:
        if not self.partition:
            return nodes
        return [n for n in nodes if self.partition in n.partitions]

    # ---- helpers --------------------------------------------------------------------------

    def _by_name(self, jobs: Iterable[SlurmJob]) -> dict[str, list[SlurmJob]]:
        by_name: dict[str, list[SlurmJob]] = {}
        for job in jobs:
            if job.job_id not in self._deleted:
                by_name.setdefault(job.meta.name, []).append(job)
        return by_name

    def _current(self, rec: Record | None, cands: list[SlurmJob]) -> SlurmJob | None:
        """The job that is the replica now: the recorded one, or a newer live one (a submit
        interrupted before it wrote its record)."""
        job = None
        if rec is not None and rec.job_id is not None:
            job = next((j for j in cands if j.job_id == rec.job_id), None)
        floor = rec.meta.attempt if rec is not None and rec.meta is not None else -1
        newer = [j for j in cands if j.live and j.meta.attempt > floor
                 and (job is None or j.job_id > job.job_id)]
        if newer:
            job = max(newer, key=lambda j: j.job_id)
        if job is None and (rec is None or rec.meta is None):
            live = [j for j in cands if j.live]
            job = max(live, key=lambda j: j.job_id) if live else None
        return job

    def _status(self, name: str, rec: Record | None, cands: list[SlurmJob],
                max_id: int) -> ReplicaStatus | None:
        job = self._current(rec, cands)
        meta = job.meta if job is not None else (rec.meta if rec is not None else None)
        if meta is None:
            return None
        if job is not None:
            recorded = (rec.exit_code if rec is not None and rec.exit_job_id == job.job_id
                        and job.final else None)
            outcome = job_outcome(job, recorded)
        else:
            assert rec is not None
            outcome = self._gone_outcome(rec, max_id)
        return ReplicaStatus(
            name=name, job_uid=meta.job_uid, namespace=meta.namespace, job_name=meta.job_name,
            rank=meta.rank, state=outcome.state, exit_code=outcome.exit_code,
            reason=outcome.reason, message=outcome.message, started_at=outcome.started_at,
            finished_at=outcome.finished_at, attempt=meta.attempt,
        )

    @staticmethod
    def _gone_outcome(rec: Record, max_id: int) -> Outcome:
        """A recorded replica whose job squeue no longer (or not yet) shows."""
        if rec.job_id is None:
            return Outcome(UNKNOWN, reason="NoJobId", message="record without a Slurm job id")
        if rec.exit_job_id == rec.job_id and rec.exit_code is not None:
            return finished_outcome(rec.exit_code, rec.finished_at)
        if rec.job_id > max_id:  # submitted after the squeue snapshot was taken
            return Outcome(PENDING)
        return Outcome(FAILED, reason="Lost", message=(
            f"Slurm job {rec.job_id} left the queue without recording an exit code "
            f"(cancelled, timed out or its node failed)"))

    def _check_fits(self, spec: ReplicaSpec, nodes: list[SlurmNode]) -> None:
        check_fits(spec.name, spec.resources, nodes, f"Slurm cluster {self.name}",
                   f"partition {self.partition}; ")

    async def _submit_one(self, spec: ReplicaSpec, jobs: list[SlurmJob],
                          records: dict[str, Record], max_id: int) -> ReplicaStatus:
        rec = records.get(spec.name)
        cands = [j for j in self._by_name(jobs).get(spec.name, [])
                 if j.live or (rec is not None and j.job_id == rec.job_id)]
        current = self._current(rec, cands)
        meta = current.meta if current is not None else (rec.meta if rec else None)
        if meta is not None and meta.job_uid != spec.job_uid:
            raise Permanent(f"replica name {spec.name} is taken by job uid {meta.job_uid}")
        if meta is not None and spec.attempt <= meta.attempt:  # a retry: adopt
            if current is not None and (rec is None or rec.job_id != current.job_id):
                # submitted before a crash that kept it from writing its record: keep it now
                await self._cmd(["sh", "-c", _RECORD_SH, "sh", self.workdir, spec.name,
                                 current.meta.to_json(), str(current.job_id)],
                                what="write record")
            status = self._status(spec.name, rec, cands, max_id)
            assert status is not None
            return status
        stale = [j.job_id for j in cands if j.live]
        if stale:  # a restart while the old attempt still runs: stop it first
            await self._scancel(stale)
        prev = str(meta.attempt) if meta is not None else ""
        opts = SubmitOptions(self.workdir, self.partition, self.config.account,
                             self.config.qos, self.config.time_limit,
                             self.config.container_runtime, self.config.sbatch_args)
        script = batch_script(spec, opts).encode()
        async with self._sbatch:
            result = await self._run(
                ["sh", "-c", _SUBMIT_SH, "sh", self.workdir, spec.name, prev,
                 ReplicaMeta.of(spec).to_json(), *sbatch_args(spec, opts)],
                stdin=script,
            )
        if result.rc != 0:
            raise classify("sbatch", result.rc, result.stderr, self.name)
        job_id = parse_job_id(result.stdout)
        return ReplicaStatus(
            name=spec.name, job_uid=spec.job_uid, namespace=spec.namespace,
            job_name=spec.job_name, rank=spec.rank, state=PENDING,
            message=f"Slurm job {job_id}", attempt=spec.attempt,
        )

    async def _scancel(self, ids: list[int]) -> None:
        """Cancel, then wait (bounded) until Slurm has released the jobs' resources, so that
        capacity read right after a delete does not still count them."""
        self._deleted.update(ids)
        with contextlib.suppress(NotFound):  # ended meanwhile
            await self._cmd(["scancel", *[str(i) for i in ids]])
        wanted = set(ids)
        deadline = time.monotonic() + self.config.delete_wait
        while time.monotonic() < deadline:
            jobs, _ = await self._squeue(ids=ids)
            if not any(j.live for j in jobs if j.job_id in wanted):
                return
            await asyncio.sleep(0.1)

    async def _delete(self, match: Callable[[ReplicaMeta], bool], names: set[str],
                      job_uid: str | None) -> list[str]:
        """Delete what ``match`` selects: by ``names`` (only they are looked up) or, with
        ``job_uid``, every replica of that job (the queue, and that job's records)."""
        await self.connect()
        async with self._gate.exclusive():
            if job_uid is not None:
                (jobs, _), records = await asyncio.gather(self._squeue(),
                                                          self._records(job_uid=job_uid))
            else:
                (jobs, _), records = await asyncio.gather(self._squeue(names=sorted(names)),
                                                          self._records(sorted(names)))
            hits = [j for j in jobs if match(j.meta)]
            # what replicas() lists: recorded replicas and live jobs not yet deleted
            found = {j.meta.name for j in hits if j.live and j.job_id not in self._deleted}
            found |= {n for n, r in records.items() if r.meta is not None and match(r.meta)}
            live = [j.job_id for j in hits if j.live]
            self._deleted.update(j.job_id for j in hits)
            targets = sorted(found | names)
            for listing in self._listings:
                listing.update(targets)
            self._hidden.update(targets)
            try:
                if live:
                    await self._scancel(live)
                if targets:
                    await self._cmd(["sh", "-c", _REMOVE_SH, "sh", self.workdir, *targets],
                                    what="remove records")
            finally:
                self._hidden.subtract(targets)
                self._hidden = +self._hidden  # drop the names no delete holds any more
            return sorted(found)

    def _detect_pyslurm(self, doc: dict[str, Any]) -> None:
        if self.pyslurm_note:
            return
        release = str(((doc.get("meta") or {}).get("Slurm") or {}).get("release") or "")
        try:
            import pyslurm  # type: ignore[import-not-found]
        except ImportError:
            self.pyslurm_note = f"pyslurm not installed; using Slurm {release} commands"
            return
        version = str(getattr(pyslurm, "__version__", ""))
        same = version.split(".")[:2] == release.split(".")[:2]
        self.pyslurm_note = (
            f"pyslurm {version} {'matches' if same else 'does not match'} Slurm {release}; "
            f"using commands"
        )

    # ---- services (Slurm has none) -------------------------------------------------------------

    async def apply_service(self, spec: Any) -> Any:
        """Unsupported: a batch scheduler has no services (see ``compat.services``)."""
        from skyshift.compat.services import unsupported

        raise unsupported(self.manager)

    async def delete_service(self, namespace: str, name: str) -> None:
        from skyshift.compat.services import unsupported

        raise unsupported(self.manager)
