"""Pure parts of the ``ray`` adapter: SkyShift replicas <-> Ray Jobs API values.

Kept apart from the I/O (``adapter.py``) so they are unit-tested without a Ray cluster, and so
this module never imports ray: it works on plain dicts (``JobDetails.model_dump()``, a node's
``resources_total``). What it relies on (Ray 2.x Jobs API, checked on 2.60):

- a submission's ``metadata`` (str -> str) comes back unchanged from ``list_jobs``: SkyShift's
  own keys (:data:`MARKER` and ``skyshift.*``) say which jobs are its replicas, and what each
  reserves;
- ``status`` is PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED; ``driver_exit_code`` is the
  entrypoint's exit code once it ended (None when it never ran or was stopped);
- ``get_job_logs`` returns the entrypoint's stdout+stderr interleaved with a few lines the job
  supervisor writes itself (``<timestamp>\\tINFO job_manager.py:... -- ...`` and ``Running
  entrypoint for job <id>: <command>``), which :func:`user_log` drops;
- errors of ``JobSubmissionClient`` are ``RuntimeError("Request failed with status code N: ...")``
  for HTTP answers and ``requests`` connection errors when the dashboard cannot be reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient
from skyshift.compat.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    UNKNOWN,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.quantity import Resources

#: metadata key marking SkyShift's submissions (value: the format version)
MARKER = "skyshift"
VERSION = "v1"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Ray resources that are not SkyShift accelerators
_BUILTIN_RESOURCES = {"CPU", "GPU", "memory", "object_store_memory"}
ACCEL_PREFIX = "accelerator_type:"
#: what an accelerator-type constraint asks of a node (Ray's convention for ``accelerator_type``)
ACCEL_FRACTION = 0.001
MB = 1_000_000  # SkyShift's memory unit (quantity.py) in bytes

# Ray status -> (replica state, reason)
_STATES = {
    "PENDING": (PENDING, ""),
    "RUNNING": (RUNNING, ""),
    "SUCCEEDED": (SUCCEEDED, "Completed"),
    "FAILED": (FAILED, "Error"),
    "STOPPED": (FAILED, "Stopped"),
}
_SUPERVISOR_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\t(?:DEBUG|INFO|WARNING|ERROR) job_\w+\.py:\d+ -- "
)


@dataclass
class RayMeta:
    """What SkyShift stores in a submission's metadata."""

    name: str
    job_uid: str
    namespace: str
    job_name: str
    rank: int
    attempt: int = 0
    reserved: Resources = field(default_factory=Resources)

    @classmethod
    def of(cls, spec: ReplicaSpec) -> RayMeta:
        return cls(spec.name, spec.job_uid, spec.namespace, spec.job_name, spec.rank,
                   spec.attempt, spec.resources)

    def to_metadata(self) -> dict[str, str]:
        res = self.reserved
        out = {
            MARKER: VERSION,
            "skyshift.replica": self.name,
            "skyshift.uid": self.job_uid,
            "skyshift.namespace": self.namespace,
            "skyshift.job": self.job_name,
            "skyshift.rank": str(self.rank),
            "skyshift.attempt": str(self.attempt),
            "skyshift.cpus": repr(float(res.cpus)),
            "skyshift.memory": repr(float(res.memory)),
            "skyshift.gpus": str(int(res.gpus)),
        }
        if res.accelerators:
            out["skyshift.accelerators"] = ",".join(
                f"{k}:{v}" for k, v in sorted(res.accelerators.items()))
        return out

    @classmethod
    def from_metadata(cls, meta: Any) -> RayMeta | None:
        """The replica a submission is, or None for a job that is not SkyShift's."""
        if not isinstance(meta, dict) or meta.get(MARKER) != VERSION:
            return None
        try:
            acc: dict[str, int] = {}
            for item in str(meta.get("skyshift.accelerators") or "").split(","):
                if ":" in item:
                    kind, count = item.rsplit(":", 1)
                    acc[kind] = int(count)
            reserved = Resources(float(meta.get("skyshift.cpus") or 0),
                                 float(meta.get("skyshift.memory") or 0),
                                 int(meta.get("skyshift.gpus") or 0), acc)
            return cls(str(meta["skyshift.replica"]), str(meta["skyshift.uid"]),
                       str(meta["skyshift.namespace"]), str(meta["skyshift.job"]),
                       int(meta["skyshift.rank"]), int(meta.get("skyshift.attempt") or 0),
                       reserved)
        except (KeyError, ValueError):
            return None


def submission_id(name: str, attempt: int) -> str:
    """The Ray submission id of one attempt of a replica: its name for the first attempt,
    ``<name>.<attempt>`` after that. A new id per attempt because Ray does not take a
    submission id again safely: the job supervisor actor is named after it, and the old one
    may still be exiting (it killed the new attempt's when tried, Ray 2.60)."""
    return name if attempt <= 0 else f"{name}.{attempt}"


#: what Ray's job table shows for a job it re-created after it was deleted (a race in Ray's
#: job monitor: it writes the final status of a job whose record is already gone)
GHOST_ENTRYPOINT = "Entrypoint not found."


def is_ghost(job: dict[str, Any]) -> bool:
    return job.get("entrypoint") == GHOST_ENTRYPOINT and not job.get("metadata")


def current(jobs: list[dict[str, Any]]) -> dict[str, tuple[RayMeta, ReplicaStatus, str]]:
    """Replica name -> (meta, status, submission id) of its latest attempt, over SkyShift's
    jobs in a ``list_jobs`` answer."""
    out: dict[str, tuple[RayMeta, ReplicaStatus, str]] = {}
    for job in jobs:
        got = status_of(job)
        if got is None:
            continue
        meta, status = got
        have = out.get(meta.name)
        if have is None or meta.attempt > have[0].attempt:
            out[meta.name] = (meta, status, str(job.get("submission_id") or ""))
    return out


def validate_spec(spec: ReplicaSpec) -> None:
    """A replica Ray can take: its name is the submission id, its env names are env names."""
    if not _NAME.fullmatch(spec.name):
        raise Permanent(f"invalid replica name {spec.name!r}: must be a DNS-1123 label")
    if spec.rank < 0 or spec.attempt < 0:
        raise Permanent(f"replica {spec.name}: rank and attempt must be >= 0")
    for what, value in (("namespace", spec.namespace), ("job name", spec.job_name)):
        if not _NAME.fullmatch(value):  # in the job's metadata and its environment
            raise Permanent(f"replica {spec.name}: invalid {what} {value[:80]!r}")
    if not spec.run.strip():
        raise Permanent(f"replica {spec.name}: a Ray job needs a command (run)")
    for key, value in spec.envs.items():
        if not _ENV_NAME.fullmatch(str(key)) or "\0" in str(value):
            raise Permanent(f"replica {spec.name}: invalid environment variable {key!r}")


def replica_env(spec: ReplicaSpec) -> dict[str, str]:
    env = {str(k): str(v) for k, v in spec.envs.items()}
    env.update(SKYSHIFT_JOB=spec.job_name, SKYSHIFT_NAMESPACE=spec.namespace,
               SKYSHIFT_RANK=str(spec.rank), SKYSHIFT_REPLICA=spec.name)
    return env


def entrypoint_resources(res: Resources, custom: set[str]) -> dict[str, Any]:
    """``submit_job`` keyword arguments reserving ``res`` for the entrypoint.

    An accelerator whose name is a custom resource of the cluster (``custom``, e.g. ``TPU``) is
    asked for by that name and count; any other is a GPU type: its count goes into
    ``entrypoint_num_gpus`` and ``accelerator_type:<name>`` constrains the node (Ray's
    convention). ``gpus`` counts all GPUs (typed ones included), as for Slurm."""
    out: dict[str, Any] = {}
    extra: dict[str, float] = {}
    typed = 0
    gpu_types = []
    for kind, count in sorted(res.accelerators.items()):
        if count <= 0:
            continue
        if kind in custom:
            extra[kind] = float(count)
        else:
            typed += count
            gpu_types.append(kind)
    if len(gpu_types) > 1:
        raise Permanent(f"a Ray node has one accelerator type; asked for {', '.join(gpu_types)}")
    for kind in gpu_types:
        extra[ACCEL_PREFIX + kind] = ACCEL_FRACTION
    gpus = max(res.gpus, typed)
    if res.cpus > 0:
        out["entrypoint_num_cpus"] = float(res.cpus)
    if gpus > 0:
        out["entrypoint_num_gpus"] = float(gpus)
    if res.memory > 0:
        out["entrypoint_memory"] = int(res.memory * MB)
    if extra:
        out["entrypoint_resources"] = extra
    return out


def node_capacity(total: dict[str, Any]) -> Resources:
    """A node's ``resources_total`` -> SkyShift resources: its GPUs count under its
    ``accelerator_type:<T>`` (when it has one), custom resources become accelerators."""
    def num(key: str) -> float:
        value = total.get(key, 0)
        return float(value) if isinstance(value, int | float) else 0.0

    gpus = int(num("GPU"))
    acc: dict[str, int] = {}
    for key, value in total.items():
        if not isinstance(value, int | float) or key in _BUILTIN_RESOURCES:
            continue
        if key.startswith(ACCEL_PREFIX):
            kind = key[len(ACCEL_PREFIX):]
            if kind and gpus:
                acc[kind] = gpus
        elif not key.startswith("node:") and value >= 1:
            acc[key] = int(value)
    return Resources(cpus=num("CPU"), memory=num("memory") / MB, gpus=gpus, accelerators=acc)


def custom_resources(total: dict[str, Any]) -> set[str]:
    return {k for k in total if k not in _BUILTIN_RESOURCES and not k.startswith(("node:",
                                                                                ACCEL_PREFIX))}


def reservation(meta: RayMeta, custom: set[str]) -> Resources:
    """What a running replica holds, in node terms (typed GPUs count as GPUs of that type)."""
    res = meta.reserved
    typed = sum(v for k, v in res.accelerators.items() if k not in custom and v > 0)
    return Resources(res.cpus, res.memory, max(res.gpus, typed), dict(res.accelerators))


def _epoch_ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value) / 1000.0


def status_of(job: dict[str, Any]) -> tuple[RayMeta, ReplicaStatus] | None:
    """One ``list_jobs`` entry (as a dict) -> the replica it is, or None if not SkyShift's."""
    meta = RayMeta.from_metadata(job.get("metadata"))
    if meta is None:
        return None
    raw = str(getattr(job.get("status"), "value", job.get("status")) or "").upper()
    state, reason = _STATES.get(raw, (UNKNOWN, raw.title()))
    code = job.get("driver_exit_code")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = ""
    started = _epoch_ms(job.get("start_time"))
    finished = _epoch_ms(job.get("end_time"))
    if state == SUCCEEDED:
        exit_code = 0 if exit_code is None else exit_code
    elif state == FAILED:
        error = str(job.get("error_type") or "")
        if raw == "FAILED" and exit_code is not None and exit_code > 128:
            reason = "Signaled"
        elif raw == "FAILED" and exit_code is None:
            reason = error.title().replace("_", "") or "Error"
        first = str(job.get("message") or "").split("\n", 1)[0]
        message = first[:300] if raw != "FAILED" or exit_code is None else f"exit code {exit_code}"
    elif state == PENDING:
        message = str(job.get("message") or "")[:300]
        started = None
    if state in (PENDING, RUNNING):
        finished = None
    return meta, ReplicaStatus(
        name=meta.name, job_uid=meta.job_uid, namespace=meta.namespace, job_name=meta.job_name,
        rank=meta.rank, state=state, exit_code=exit_code, reason=reason, message=message,
        started_at=started, finished_at=finished, attempt=meta.attempt,
    )


def is_terminal(job: dict[str, Any]) -> bool:
    raw = str(getattr(job.get("status"), "value", job.get("status")) or "").upper()
    return raw in ("SUCCEEDED", "FAILED", "STOPPED")


def user_log(text: str, submission_id: str, tail: int | None = None) -> str:
    """The entrypoint's output without the job supervisor's own lines; the last ``tail``
    lines when given."""
    marker = f"Running entrypoint for job {submission_id}: "
    lines = [line for line in text.splitlines(keepends=True)
             if not _SUPERVISOR_LINE.match(line) and not line.startswith(marker)]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return "".join(lines)


_STATUS = re.compile(r"status code (\d{3})")


def classify(what: str, exc: BaseException, cluster: str) -> CompatError:
    """The compat error for a failed Jobs API call (its HTTP status, or that it got none)."""
    if isinstance(exc, CompatError):
        return exc
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else type(exc).__name__
    # the server's traceback ends with the error that matters
    last = text.splitlines()[-1][:300] if text else ""
    msg = f"{what} on Ray cluster {cluster} failed: {first}"
    if last and last != first:
        msg += f" ({last})"
    m = _STATUS.search(text)
    if m is None:
        if isinstance(exc, ValueError | TypeError):
            return Permanent(msg)
        # connection refused, timeouts, DNS: the dashboard is not reachable right now
        return Transient(msg)
    code = int(m.group(1))
    if code == 404:
        return NotFound(msg)
    if code in (400, 401, 403, 405, 422):
        return Permanent(msg)
    if "already exists" in text:
        return Transient(msg)  # the caller adopts; reaching here means it could not
    return Transient(msg)
