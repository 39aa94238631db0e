"""How SkyShift replicas map onto SkyPilot jobs, and SkyPilot's answers back onto SkyShift's types.

SkyPilot's job table keeps a job's name, status, times and nothing SkyShift can attach, so the
job name carries the replica's identity: ``<replica>.ss1.<namespace>.<job uid>.a<attempt>.
c<millicpus>.m<MB>`` (``ss1``: format 1; every part matches SkyPilot's task-name rule of
alphanumerics separated by ``.``/``-``/``_``). It starts with the replica name, so ``sky queue``
stays readable, and a new manager instance rebuilds every replica (and what it reserves) from
one queue call. Jobs whose names do not parse are not SkyShift's and are never touched.

SkyPilot's queue says FAILED but not with which code: the log of a failed job says (SkyPilot's
"failed with return code list: [7]" line), read once. ``sky logs`` prints SkyPilot's own lines
around the task's, and each of the task's lines prefixed with ``(<job name>, pid=N)``: the logs
users see are the task's lines only, without the prefix or colours.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from skyshift.compat.errors import Permanent
from skyshift.compat.skypilot.client import SkyJob
from skyshift.compat.types import FAILED, PENDING, RUNNING, SUCCEEDED, ReplicaSpec, ReplicaStatus
from skyshift.models.quantity import Resources

FORMAT = "ss1"
_SIMPLE = re.compile(r"[a-zA-Z0-9]+(?:[_-]{1,2}[a-zA-Z0-9]+)*")  # no dots: they separate parts
_PART = re.compile(r"[a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*")
_STATES = {
    "INIT": PENDING, "PENDING": PENDING, "SETTING_UP": PENDING, "RUNNING": RUNNING,
    "SUCCEEDED": SUCCEEDED, "FAILED": FAILED, "FAILED_SETUP": FAILED, "FAILED_DRIVER": FAILED,
}
CANCELLED = "CANCELLED"
# SkyPilot's prefix on each line of a task's output: "(task-name, pid=1234) "
_LINE_PREFIX = re.compile(r"^\([^()\s]*, pid=\d+\) ?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RETURN_CODES = re.compile(r"failed with return code list:\s*\[([-\d, ]+)\]")


@dataclass(frozen=True)
class JobMeta:
    """A replica's identity and reservation, as carried in its SkyPilot job name."""

    name: str
    namespace: str
    job_uid: str
    attempt: int
    cpus: float
    memory: float

    @classmethod
    def of(cls, spec: ReplicaSpec) -> JobMeta:
        return cls(spec.name, spec.namespace, spec.job_uid, spec.attempt,
                   spec.resources.cpus, spec.resources.memory)

    def job_name(self) -> str:
        out = (f"{self.name}.{FORMAT}.{self.namespace}.{self.job_uid}.a{self.attempt}"
               f".c{round(self.cpus * 1000)}.m{round(self.memory)}")
        if (not _PART.fullmatch(out) or f".{FORMAT}." in self.name
                or not _SIMPLE.fullmatch(self.namespace) or not _SIMPLE.fullmatch(self.job_uid)):
            raise Permanent(f"replica {self.name}: name, namespace or job uid cannot be part "
                            "of a SkyPilot job name (letters and digits, - or _ between them; "
                            ". in the name only)")
        return out

    @classmethod
    def parse(cls, job_name: str) -> JobMeta | None:
        name, sep, rest = job_name.rpartition(f".{FORMAT}.")
        parts = rest.split(".")
        if not sep or not name or len(parts) != 5:
            return None
        ns, uid, a, c, m = parts
        try:
            if a[0] != "a" or c[0] != "c" or m[0] != "m":
                return None
            return cls(name, ns, uid, int(a[1:]), int(c[1:]) / 1000, float(m[1:]))
        except (ValueError, IndexError):
            return None

    @property
    def job_name_part(self) -> str:
        """The SkyShift job's name: the replica name without ``-<uid8>-<rank>``."""
        base = self.name.rsplit("-", 2)
        return base[0] if len(base) == 3 else self.name

    @property
    def rank(self) -> int:
        tail = self.name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    @property
    def whole_cpus(self) -> int:
        """CPUs the job holds: SkyPilot on Slurm runs a job as an exclusive ``srun`` step of
        ``ceil(cpus)`` CPUs (``--cpus-per-task``), and a job without a demand asks 0.5 -> 1."""
        return max(1, math.ceil(self.cpus - 1e-9))

    @property
    def reservation(self) -> Resources:
        return Resources(cpus=self.whole_cpus, memory=self.memory)


def validate_spec(spec: ReplicaSpec) -> None:
    res = spec.resources
    if res.gpus or any(res.accelerators.values()):
        raise Permanent(f"replica {spec.name}: the skypilot manager does not place GPUs or "
                        "accelerators on provisioned clusters yet")
    JobMeta.of(spec).job_name()


def replica_env(spec: ReplicaSpec) -> dict[str, str]:
    env = {str(k): str(v) for k, v in spec.envs.items()}
    env.update(SKYSHIFT_JOB=spec.job_name, SKYSHIFT_NAMESPACE=spec.namespace,
               SKYSHIFT_RANK=str(spec.rank), SKYSHIFT_REPLICA=spec.name)
    return env


def status_of(meta: JobMeta, job: SkyJob, exit_code: int | None) -> ReplicaStatus:
    state = _STATES.get(job.status, PENDING)
    if state == SUCCEEDED:
        exit_code = 0
    elif state == FAILED and exit_code is None and job.exit_codes:
        exit_code = job.exit_codes[0]
    return ReplicaStatus(
        name=meta.name, job_uid=meta.job_uid, namespace=meta.namespace,
        job_name=meta.job_name_part, rank=meta.rank, state=state,
        exit_code=exit_code if state in (SUCCEEDED, FAILED) else None,
        reason=job.status if state == FAILED else "",
        message=f"SkyPilot job {job.job_id}: {job.status}",
        started_at=job.start_at if state != PENDING else None,
        finished_at=job.end_at if state in (SUCCEEDED, FAILED) else None,
        attempt=meta.attempt,
    )


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def exit_code_in(log: str) -> int | None:
    """The exit status SkyPilot reports for a failed job in its log (first task's)."""
    found = _RETURN_CODES.findall(strip_ansi(log))
    if not found:
        return None
    try:
        return int(found[-1].split(",")[0])
    except ValueError:
        return None


def user_log(text: str, tail: int | None = None) -> str:
    """The task's own lines of a ``sky logs`` output (SkyPilot's lines, prefixes and colours
    removed); the last ``tail`` of them when given."""
    lines = []
    for line in strip_ansi(text).splitlines():
        if _LINE_PREFIX.match(line):
            lines.append(_LINE_PREFIX.sub("", line, count=1))
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return "\n".join(lines) + ("\n" if lines else "")


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
_INSTANCE = re.compile(r"(\d+(?:\.\d+)?)CPU--(\d+(?:\.\d+)?)GB")


def node_capacity(record: dict[str, object]) -> Resources:
    """Per-node cpus and MB of a launched SkyPilot cluster (its status record)."""
    cpus = _first_number(str(record.get("cpus") or ""))
    mem_gb = _first_number(str(record.get("memory") or ""))
    found = _INSTANCE.search(str(record.get("instance_type") or ""))
    if found:
        cpus = cpus or float(found.group(1))
        mem_gb = mem_gb or float(found.group(2))
    return Resources(cpus=cpus, memory=mem_gb * 1024)


def _first_number(text: str) -> float:
    found = _NUMBER.search(text)
    return float(found.group(1)) if found else 0.0
