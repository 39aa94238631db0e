"""Pure parts of the Slurm adapter: reading Slurm's JSON, mapping states, classifying errors.

Kept apart from the I/O (``adapter.py``, ``runner.py``) so they can be unit-tested on
outputs recorded from a real Slurm 22.05 (``tests/unit/test_slurm_data``). Nothing here runs a
command. Facts it relies on (22.05.8, OpenAPI plugin v0.0.38):

- ``squeue --json`` lists every job slurmctld still holds (finished ones for ``MinJobAge``) and
  ignores filters such as ``-j``/``--name``; ``exit_code`` is the raw wait status (``exit 3`` ->
  768, killed by SIGKILL -> 9); right after ``scancel`` a job shows ``COMPLETING`` for a moment.
- With slurmctld down, ``squeue --json``/``sinfo --json`` exit 0 with empty lists and an entry in
  ``errors``: an empty answer is only trusted when ``errors`` is empty.
- ``scontrol ... --json`` does not exist in 22.05, so nothing here depends on it.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, UNKNOWN, ReplicaSpec
from skyshift.models.quantity import Resources

#: Every SkyShift job's ``--comment`` starts with this; other jobs are never touched.
MARKER = "skyshift:v1"

_PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
            "RESV_DEL_HOLD", "SPECIAL_EXIT"}
_RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
            "RESIZING", "POWER_UP_NODE", "UPDATE_DB"}
# final state -> (replica state, reason)
_FINAL = {
    "COMPLETED": (SUCCEEDED, "Completed"),
    "FAILED": (FAILED, "Error"),
    "CANCELLED": (FAILED, "Cancelled"),
    "TIMEOUT": (FAILED, "Timeout"),
    "NODE_FAIL": (FAILED, "NodeFail"),
    "PREEMPTED": (FAILED, "Preempted"),
    "BOOT_FAIL": (FAILED, "BootFail"),
    "DEADLINE": (FAILED, "Deadline"),
    "OUT_OF_MEMORY": (FAILED, "OOMKilled"),
    "REVOKED": (FAILED, "Revoked"),
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
_ACCELERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


# ---- jobs -----------------------------------------------------------------------------------


@dataclass
class ReplicaMeta:
    """What SkyShift stores about a replica in the job's ``--comment`` (and record file)."""

    name: str
    job_uid: str
    namespace: str
    job_name: str
    rank: int
    attempt: int = 0

    @classmethod
    def of(cls, spec: ReplicaSpec) -> ReplicaMeta:
        return cls(spec.name, spec.job_uid, spec.namespace, spec.job_name, spec.rank,
                   spec.attempt)

    def comment(self) -> str:
        return (f"{MARKER};uid={self.job_uid};ns={self.namespace};job={self.job_name};"
                f"rank={self.rank};attempt={self.attempt}")

    @classmethod
    def from_comment(cls, name: str, comment: str) -> ReplicaMeta | None:
        """The metadata of a SkyShift job, or None for any other job."""
        parts = comment.split(";")
        if not parts or parts[0] != MARKER:
            return None
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        try:
            return cls(name, kv["uid"], kv["ns"], kv["job"], int(kv["rank"]),
                       int(kv.get("attempt", "0")))
        except (KeyError, ValueError):
            return None

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ReplicaMeta | None:
        try:
            d = json.loads(text)
            return cls(str(d["name"]), str(d["job_uid"]), str(d["namespace"]),
                       str(d["job_name"]), int(d["rank"]), int(d.get("attempt", 0)))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class SlurmJob:
    """One SkyShift job as ``squeue --json`` shows it."""

    job_id: int
    meta: ReplicaMeta
    slurm_state: str
    wait_status: int = 0
    state_reason: str = ""
    description: str = ""
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    nodes: str = ""

    @property
    def final(self) -> bool:
        return self.slurm_state not in _PENDING and self.slurm_state not in _RUNNING

    @property
    def live(self) -> bool:
        """Pending or running (COMPLETING counts as live: it has not ended for Slurm yet)."""
        return not self.final


def check_errors(doc: dict[str, Any], what: str) -> None:
    """A JSON answer with entries in ``errors`` is not an answer (slurmctld unreachable...)."""
    errors = doc.get("errors") or []
    if errors:
        text = "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
            for e in errors
        )
        raise Transient(f"{what} failed: {text} (is slurmctld running and reachable?)")


def load_json(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise Transient(f"{what} returned something that is not JSON: {text[:200]!r}") from exc
    if not isinstance(doc, dict):
        raise Transient(f"{what} returned unexpected JSON ({type(doc).__name__})")
    check_errors(doc, what)
    return doc


def _epoch(value: Any) -> float | None:
    if isinstance(value, dict):  # newer OpenAPI versions: {"set": true, "number": N}
        value = value.get("number") if value.get("set", True) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, dict):
        value = value.get("number", default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


def _state(value: Any) -> str:
    if isinstance(value, list):  # newer versions give a list of flags
        value = value[0] if value else ""
    return str(value or "").upper()


def parse_jobs(doc: dict[str, Any]) -> list[SlurmJob]:
    """SkyShift's jobs (by comment marker) from ``squeue --json``; other jobs are skipped."""
    out = []
    for raw in doc.get("jobs") or []:
        if not isinstance(raw, dict):
            continue
        meta = ReplicaMeta.from_comment(str(raw.get("name") or ""), str(raw.get("comment") or ""))
        if meta is None:
            continue
        out.append(SlurmJob(
            job_id=_int(raw.get("job_id")),
            meta=meta,
            slurm_state=_state(raw.get("job_state")),
            wait_status=_int(raw.get("exit_code")),
            state_reason=str(raw.get("state_reason") or ""),
            description=str(raw.get("state_description") or ""),
            submit_time=_epoch(raw.get("submit_time")),
            start_time=_epoch(raw.get("start_time")),
            end_time=_epoch(raw.get("end_time")),
            nodes=str(raw.get("nodes") or ""),
        ))
    return out


def decode_wait_status(status: int) -> int:
    """Slurm's raw wait status -> a shell-style exit code (128+N when killed by signal N)."""
    signo = status & 0x7F
    return 128 + signo if signo else (status >> 8) & 0xFF


@dataclass
class Outcome:
    """The replica-level view of a job: state, exit code, reason, message, times."""

    state: str
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    started_at: float | None = None
    finished_at: float | None = None


def finished_outcome(code: int, finished_at: float | None, started_at: float | None = None,
                     ) -> Outcome:
    """For an exit code recorded by the batch script."""
    if code == 0:
        return Outcome(SUCCEEDED, 0, "Completed", "", started_at, finished_at)
    if code > 128:
        return Outcome(FAILED, code, "Signaled", f"killed by signal {code - 128} "
                       f"(exit code {code})", started_at, finished_at)
    return Outcome(FAILED, code, "Error", f"exit code {code}", started_at, finished_at)


def job_outcome(job: SlurmJob, recorded_exit: int | None = None) -> Outcome:
    """Map one squeue entry (plus the exit code the batch script recorded, if any)."""
    state = job.slurm_state
    if state in _PENDING:
        reason = job.state_reason if job.state_reason not in ("", "None") else ""
        return Outcome(PENDING, reason=reason, message=job.description)
    if state in _RUNNING:
        reason = "Suspended" if state in ("SUSPENDED", "STOPPED") else ""
        return Outcome(RUNNING, reason=reason, started_at=job.start_time)
    if state not in _FINAL:
        return Outcome(UNKNOWN, reason=state.title(), message=f"Slurm state {state}",
                       started_at=job.start_time)
    code = recorded_exit if recorded_exit is not None else decode_wait_status(job.wait_status)
    if state in ("COMPLETED", "FAILED"):
        out = finished_outcome(code, job.end_time, job.start_time)
        if state == "FAILED" and code == 0:  # e.g. a launch failure before the command ran
            out = Outcome(FAILED, None, "Error", job.state_reason, job.start_time, job.end_time)
        return out
    replica_state, reason = _FINAL[state]
    message = f"Slurm job {job.job_id} ended {state}"
    if job.state_reason not in ("", "None"):
        message += f" ({job.state_reason})"
    return Outcome(replica_state, code if recorded_exit is not None else None, reason, message,
                   job.start_time, job.end_time)


# ---- nodes ----------------------------------------------------------------------------------

_BAD_STATES = {"DOWN", "ERROR", "FUTURE", "UNKNOWN", "FAIL", "INVAL"}
_BAD_FLAGS = {"DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "FAIL", "POWERED_DOWN",
              "POWERING_DOWN", "REBOOT_ISSUED", "REBOOT_REQUESTED", "MAINTENANCE", "INVALID",
              "RESERVED"}


@dataclass
class SlurmNode:
    name: str
    capacity: Resources
    allocatable: Resources
    partitions: list[str] = field(default_factory=list)
    usable: bool = True
    state: str = ""


def _split_gres(text: str) -> list[str]:
    """``"gpu:a100:2(S:0-1),mps:100"`` -> items, ignoring commas inside parentheses."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    return [i.strip() for i in items if i.strip() and i.strip() != "(null)"]


def parse_gres(text: str) -> tuple[int, dict[str, int]]:
    """GPUs and typed accelerators in a node's gres or gres_used string."""
    gpus, acc = 0, dict[str, int]()
    for item in _split_gres(text or ""):
        base = item.split("(", 1)[0]
        parts = base.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        try:
            count = int(parts[-1])
        except ValueError:
            continue
        gpus += count
        if len(parts) >= 3 and parts[1]:
            acc[parts[1]] = acc.get(parts[1], 0) + count
    return gpus, acc


def parse_nodes(doc: dict[str, Any]) -> list[SlurmNode]:
    """Nodes from ``sinfo --json``: capacity, and capacity minus what is allocated."""
    out = []
    for raw in doc.get("nodes") or []:
        if not isinstance(raw, dict):
            continue
        cpus = _int(raw.get("cpus"))
        mem = _int(raw.get("real_memory"))
        gpus, acc = parse_gres(str(raw.get("gres") or ""))
        used_gpus, used_acc = parse_gres(str(raw.get("gres_used") or ""))
        state = _state(raw.get("state"))
        flags = {str(f).upper() for f in raw.get("state_flags") or []}
        usable = state not in _BAD_STATES and not (flags & _BAD_FLAGS)
        capacity = Resources(cpus=float(cpus), memory=float(mem), gpus=gpus, accelerators=acc)
        if usable:
            allocatable = Resources(
                cpus=float(max(0, cpus - _int(raw.get("alloc_cpus")))),
                memory=float(max(0, mem - _int(raw.get("alloc_memory")))),
                gpus=max(0, gpus - used_gpus),
                accelerators={k: max(0, v - used_acc.get(k, 0)) for k, v in acc.items()},
            )
        else:
            allocatable = Resources(accelerators={k: 0 for k in acc})
        partitions = [str(p) for p in raw.get("partitions") or []]
        out.append(SlurmNode(str(raw.get("name") or ""), capacity, allocatable, partitions,
                             usable, (state + ("+" + "+".join(sorted(flags)) if flags else ""))
                             .lower()))
    return out


def parse_partitions(text: str) -> tuple[list[str], str | None]:
    """``sinfo -h -o %P`` -> (partitions, the default one marked with ``*``)."""
    names, default = [], None
    for line in text.split():
        name = line.strip()
        if name.endswith("*"):
            name = name[:-1]
            default = name
        if name and name not in names:
            names.append(name)
    return names, default


# ---- submission -----------------------------------------------------------------------------


@dataclass
class SubmitOptions:
    """Cluster-level settings that shape every submission."""

    workdir: str
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: str | None = None
    container_runtime: str = ""
    sbatch_args: list[str] = field(default_factory=list)


def validate_spec(spec: ReplicaSpec) -> None:
    if not _NAME.fullmatch(spec.name):
        raise Permanent(f"invalid replica name {spec.name!r}: must be a DNS-1123 label")
    if spec.rank < 0 or spec.attempt < 0:
        raise Permanent(f"replica {spec.name}: rank and attempt must be >= 0")
    # all three go into --comment and the script's environment: a strict grammar, not a list
    # of characters to refuse (a '\r', a tab or a ',' slipped past the list)
    for what, value, grammar in (("job uid", spec.job_uid, _UID), ("namespace", spec.namespace,
                                 _NAME), ("job name", spec.job_name, _NAME)):
        if not grammar.fullmatch(value):
            raise Permanent(f"replica {spec.name}: invalid {what} {value[:80]!r}")
    for kind in spec.resources.accelerators:  # they go into --gres
        if not _ACCELERATOR.fullmatch(str(kind)):
            raise Permanent(f"replica {spec.name}: invalid accelerator {str(kind)[:40]!r}")
    for key in spec.envs:
        if not _ENV_NAME.fullmatch(str(key)):
            raise Permanent(f"replica {spec.name}: invalid environment variable name {key!r}")


def sbatch_args(spec: ReplicaSpec, opts: SubmitOptions) -> list[str]:
    """Options for ``sbatch --parsable`` (the script itself goes to stdin)."""
    res = spec.resources
    args = [
        "--parsable",
        f"--job-name={spec.name}",
        f"--comment={ReplicaMeta.of(spec).comment()}",
        f"--chdir={opts.workdir}",
        f"--output={opts.workdir}/{spec.name}.out",
        "--nodes=1",
        "--ntasks=1",
    ]
    if opts.partition:
        args.append(f"--partition={opts.partition}")
    if opts.account:
        args.append(f"--account={opts.account}")
    if opts.qos:
        args.append(f"--qos={opts.qos}")
    if opts.time_limit:
        args.append(f"--time={opts.time_limit}")
    if res.cpus > 0:
        args.append(f"--cpus-per-task={max(1, math.ceil(res.cpus - 1e-9))}")
    if res.memory > 0:  # memory-less (CPU-only) jobs use the cluster's default
        args.append(f"--mem={max(1, math.ceil(res.memory - 1e-9))}M")
    gres = [f"gpu:{kind}:{n}" for kind, n in sorted(res.accelerators.items()) if n > 0]
    typed = sum(n for n in res.accelerators.values() if n > 0)
    if res.gpus > typed:
        gres.append(f"gpu:{res.gpus - typed}")
    if gres:
        args.append(f"--gres={','.join(gres)}")
    args.extend(opts.sbatch_args)
    return args


def replica_env(spec: ReplicaSpec) -> dict[str, str]:
    env = {str(k): str(v) for k, v in spec.envs.items()}
    env.update(SKYSHIFT_JOB=spec.job_name, SKYSHIFT_NAMESPACE=spec.namespace,
               SKYSHIFT_RANK=str(spec.rank), SKYSHIFT_REPLICA=spec.name)
    return env


def command_line(spec: ReplicaSpec, container_runtime: str) -> str:
    """The shell line running the replica: plain ``/bin/sh -c``, or in a container when (and
    only when) the cluster declares a runtime."""
    run = ["/bin/sh", "-c", spec.run]
    if container_runtime and spec.image:
        image = spec.image
        if "://" not in image and not image.endswith(".sif") and not image.startswith("/"):
            image = f"docker://{image}"
        extra = ["--nv"] if spec.resources.gpus > 0 or spec.resources.accelerators else []
        run = [container_runtime, "exec", *extra, image, *run]
    return shlex.join(run)


def batch_script(spec: ReplicaSpec, opts: SubmitOptions) -> str:
    """The batch script: env, the command, then its exit code into ``<name>.exit`` so the
    outcome survives the job leaving squeue (no dependence on sacct)."""
    exit_file = f"{opts.workdir}/{spec.name}.exit"
    lines = [
        "#!/bin/sh",
        f"# SkyShift replica {spec.name}: job {spec.namespace}/{spec.job_name} rank {spec.rank}"
        f" attempt {spec.attempt}",
    ]
    env = replica_env(spec)
    lines.append(_ENV_LINE + json.dumps(env, separators=(",", ":")))  # read back by exec
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += [
        command_line(spec, opts.container_runtime),
        "rc=$?",
        f"tmp={shlex.quote(exit_file)}.$SLURM_JOB_ID",
        'printf "%s %s %s\\n" "$SLURM_JOB_ID" "$rc" "$(date +%s)" > "$tmp" && '
        f'mv -f "$tmp" {shlex.quote(exit_file)}',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


_ENV_LINE = "# skyshift-env: "


def parse_exports(script: str) -> dict[str, str]:
    """The replica's env vars, from the JSON comment :func:`batch_script` writes (values may
    hold newlines, so the ``export`` lines themselves are not parsed)."""
    for line in script.splitlines():
        if line.startswith(_ENV_LINE):
            try:
                env = json.loads(line[len(_ENV_LINE):])
            except ValueError:
                return {}
            if isinstance(env, dict):
                return {str(k): str(v) for k, v in env.items() if _ENV_NAME.fullmatch(str(k))}
    return {}


_SRUN_NOISE = re.compile(r"^srun: error: \S+: task \d+: (Exited with exit code \d+|Killed)\s*$")


def strip_srun_noise(stderr: str) -> str:
    """Drop srun's own report of the exit code (the caller gets it as the exit code)."""
    return "".join(
        line for line in stderr.splitlines(keepends=True) if not _SRUN_NOISE.match(line)
    )


def parse_job_id(stdout: str) -> int:
    """``sbatch --parsable`` prints ``<id>`` or ``<id>;<cluster>``."""
    text = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    head = text.split(";", 1)[0].strip()
    if not head.isdigit():
        raise Transient(f"sbatch printed no job id: {stdout[:200]!r}")
    return int(head)


# ---- records on disk ------------------------------------------------------------------------


@dataclass
class Record:
    """What the workdir says about a replica: ``<name>.job`` and ``<name>.exit``."""

    meta: ReplicaMeta | None = None
    job_id: int | None = None
    exit_job_id: int | None = None
    exit_code: int | None = None
    finished_at: float | None = None


def parse_records(text: str) -> dict[str, Record]:
    """Output of ``grep -H '' *.job *.exit`` -> name -> record."""
    records: dict[str, Record] = {}
    for line in text.splitlines():
        path, sep, content = line.partition(":")
        if not sep:
            continue
        fname = path.rsplit("/", 1)[-1]
        name, _, ext = fname.rpartition(".")
        if not _NAME.fullmatch(name) or ext not in ("job", "exit"):
            continue
        rec = records.setdefault(name, Record())
        content = content.strip()
        if ext == "job":
            if content.isdigit():
                rec.job_id = int(content)
            elif (meta := ReplicaMeta.from_json(content)) is not None:
                rec.meta = meta
        else:
            parts = content.split()
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].lstrip("-").isdigit():
                rec.exit_job_id, rec.exit_code = int(parts[0]), int(parts[1])
                if len(parts) >= 3 and parts[2].isdigit():
                    rec.finished_at = float(parts[2])
    return records


# ---- errors ---------------------------------------------------------------------------------

_TRANSIENT = (
    "unable to contact slurm controller", "socket timed out", "connection refused",
    "connect failure", "zero bytes were transmitted", "transport endpoint",
    "temporarily", "connection reset", "not responding", "communication connection failure",
    "job submit limit", "slurm_persist_conn", "timed out", "try again",
)
_PERMANENT = (
    "could not establish a configuration source", "unable to process configuration file",
    "invalid user", "access/permission denied", "authentication", "munge",
    "permission denied", "invalid partition", "invalid account", "invalid qos",
    "requested node configuration is not available", "invalid generic resource",
    "memory specification can not be satisfied", "more processors requested than permitted",
    "node count specification invalid", "invalid time limit", "unrecognized option",
    "invalid option",
)


def classify(command: str, rc: int, stderr: str, cluster: str) -> CompatError:
    """The compat error for a failed Slurm command (its stderr decides)."""
    text = stderr.strip() or f"exit status {rc}"
    low = text.lower()
    msg = f"{command} on cluster {cluster} failed: {text[:500]}"
    if rc == 127 or "command not found" in low:
        return Permanent(f"{command} not found on cluster {cluster}'s host: are the Slurm "
                         f"client commands installed? ({text[:200]})")
    if "invalid job id" in low:
        return NotFound(msg)
    if any(p in low for p in _PERMANENT):
        return Permanent(msg)
    if any(p in low for p in _TRANSIENT):
        return Transient(msg)
    if command == "sbatch" and "submission failed" in low:
        return Permanent(msg)
    return Transient(msg)
