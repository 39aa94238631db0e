"""Reading the Slurm queue as compact text instead of ``squeue --json``.

``squeue --json`` (22.05) costs about 4 KB per job and ignores ``--name``/``-j``, so every look
at the queue paid for every job slurmctld still holds (4 MB at 1,100 jobs, finished ones
included for ``MinJobAge``). ``squeue --noheader --Format`` with ``SLURM_TIME_FORMAT=%s`` gives
the same facts (id, raw wait status, state, reason, epoch times, nodes, name, comment) in about
180 bytes per job and honours ``--name`` and ``--jobs``, so a submit looks up only the names it
submits. Verified on Slurm 22.05.8: ``exit_code`` is the raw wait status (``exit 3`` -> 768),
an unset comment prints ``(null)``, unset times print ``N/A``/``Unknown``/``0``; ``--jobs`` with
only ids slurmctld forgot fails with "Invalid job id specified" (``NotFound`` once classified).

Fields are separated by ``|``; name and comment come last because only foreign jobs may put a
``|`` in them, and those are skipped by the comment marker anyway.

Pending jobs' requests (every user's, not only SkyShift's) are what a batch cluster's queue
holds (``QueueState.queued``; SkyShift queues work there only up to a bound that counts them).
Verified on 22.05.8: for a job not yet running ``tres-alloc`` prints the requested CPUs and
memory, totals over its nodes (``cpu=2,mem=1G,node=1,billing=2``; memory with a K/M/G/T suffix)
but no GRES, which only ``tres-per-node`` (``gres:gpu:1``, ``gres:gpu:a100:2``, per node) and
``tres-per-job`` (``--gpus``) show; ``N/A`` when unset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from skyshift.compat.slurm.parse import ReplicaMeta, SlurmJob
from skyshift.models.quantity import Resources

_FIELDS = ("JobID", "exit_code", "State", "Reason", "SubmitTime", "StartTime", "EndTime",
           "NodeList", "Partition", "tres-alloc", "tres-per-node", "tres-per-job", "Name",
           "Comment")
FORMAT = ",".join(f"{f}:|" for f in _FIELDS[:-1]) + f",{_FIELDS[-1]}:"
_NAME = _FIELDS.index("Name")
# pending for a reason that keeps the job off the nodes whatever frees up: not competing for
# capacity soon, so not counted in the queue (held, waiting on another job or on a start time)
_PARKED = ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied",
           "BeginTime", "PartitionDown", "PartitionInactive")
_MEM = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTP]?)$")
_MB = {"K": 1 / 1024, "": 1.0, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2, "P": 1024.0 ** 3}


@dataclass
class PendingJob:
    """A job waiting in Slurm's queue (anyone's): its partitions and what it asked for."""

    job_id: int
    partitions: list[str] = field(default_factory=list)
    request: Resources = field(default_factory=Resources)


def squeue_argv(names: list[str] | None = None, ids: list[int] | None = None,
                states: str = "all") -> list[str]:
    """The command: every job slurmctld holds (any state, or ``states``), optionally only
    these names/ids."""
    argv = ["env", "SLURM_TIME_FORMAT=%s", "squeue", "--noheader", f"--states={states}",
            f"--Format={FORMAT}"]
    if names:
        argv.append(f"--name={','.join(sorted(set(names)))}")
    if ids:
        argv.append(f"--jobs={','.join(str(i) for i in sorted(set(ids)))}")
    return argv


def _epoch(text: str) -> float | None:
    text = text.strip()
    return float(text) if text.isdigit() and int(text) > 0 else None


def _int(text: str) -> int:
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else 0


def parse_tres(text: str) -> tuple[Resources, int]:
    """``cpu=2,mem=1.5G,node=1`` -> (Resources with MB of memory, nodes)."""
    cpus, memory, nodes = 0.0, 0.0, 1
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        value = value.strip()
        if key == "cpu" and value.isdigit():
            cpus = float(value)
        elif key == "mem" and (m := _MEM.fullmatch(value.upper())):
            memory = float(m.group(1)) * _MB[m.group(2)]
        elif key == "node" and value.isdigit():
            nodes = max(1, int(value))
    return Resources(cpus, memory), nodes


def parse_gpus(text: str) -> tuple[int, dict[str, int]]:
    """``gres:gpu:2`` / ``gres:gpu:a100:1,gres:gpu:t4:1`` (or ``gres/gpu...``) -> GPUs in
    total and typed ones as accelerators (as a node's gres is read); anything else ignored."""
    gpus, acc = 0, dict[str, int]()
    for item in text.split(","):
        parts = item.strip().replace("gres/", "gres:", 1).split(":")
        if len(parts) < 3 or parts[:2] != ["gres", "gpu"] or not parts[-1].isdigit():
            continue
        count = int(parts[-1])
        gpus += count
        if len(parts) >= 4 and parts[2]:
            acc[parts[2]] = acc.get(parts[2], 0) + count
    return gpus, acc


def pending_request(tres: str, per_node: str, per_job: str) -> Resources:
    """A pending job's whole request from its ``tres-alloc``, ``tres-per-node`` and
    ``tres-per-job`` columns."""
    base, nodes = parse_tres(tres)
    node_gpus, node_acc = parse_gpus(per_node)
    job_gpus, job_acc = parse_gpus(per_job)
    acc = {kind: n * nodes for kind, n in node_acc.items()}
    for kind, n in job_acc.items():
        acc[kind] = acc.get(kind, 0) + n
    return Resources(base.cpus, base.memory, node_gpus * nodes + job_gpus, acc)


def parse_squeue(text: str) -> tuple[list[SlurmJob], int, list[PendingJob]]:
    """SkyShift's jobs (by comment marker), the highest job id shown (any job), and every
    job pending in the queue (any user's; held ones and those waiting on a dependency or a
    start time left out)."""
    jobs: list[SlurmJob] = []
    pending: list[PendingJob] = []
    max_id = 0
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < len(_FIELDS) or not parts[0].strip().isdigit():
            continue
        job_id = int(parts[0].strip())
        max_id = max(max_id, job_id)
        state, reason = parts[2].strip().upper(), parts[3].strip()
        if state == "PENDING" and reason not in _PARKED:
            pending.append(PendingJob(
                job_id, [p for p in parts[8].strip().split(",") if p],
                pending_request(parts[9], parts[10], parts[11]),
            ))
        name = parts[_NAME].strip()
        meta = ReplicaMeta.from_comment(name, "|".join(parts[_NAME + 1:]).strip())
        if meta is None:
            continue
        jobs.append(SlurmJob(
            job_id=job_id,
            meta=meta,
            slurm_state=state,
            wait_status=_int(parts[1]),
            state_reason="" if reason in ("(null)", "None") else reason,
            submit_time=_epoch(parts[4]),
            start_time=_epoch(parts[5]),
            end_time=_epoch(parts[6]),
            nodes="" if parts[7].strip() in ("(null)", "") else parts[7].strip(),
        ))
    return jobs, max_id, pending
