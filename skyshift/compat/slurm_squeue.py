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
"""

from __future__ import annotations

from skyshift.compat.slurm_parse import ReplicaMeta, SlurmJob

_FIELDS = ("JobID", "exit_code", "State", "Reason", "SubmitTime", "StartTime", "EndTime",
           "NodeList", "Name", "Comment")
FORMAT = ",".join(f"{f}:|" for f in _FIELDS[:-1]) + f",{_FIELDS[-1]}:"


def squeue_argv(names: list[str] | None = None, ids: list[int] | None = None) -> list[str]:
    """The command: every job slurmctld holds (any state), optionally only these names/ids."""
    argv = ["env", "SLURM_TIME_FORMAT=%s", "squeue", "--noheader", "--states=all",
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


def parse_squeue(text: str) -> tuple[list[SlurmJob], int]:
    """SkyShift's jobs (by comment marker), and the highest job id shown (any job)."""
    jobs: list[SlurmJob] = []
    max_id = 0
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < len(_FIELDS) or not parts[0].strip().isdigit():
            continue
        job_id = int(parts[0].strip())
        max_id = max(max_id, job_id)
        name = parts[8].strip()
        meta = ReplicaMeta.from_comment(name, "|".join(parts[9:]).strip())
        if meta is None:
            continue
        reason = parts[3].strip()
        jobs.append(SlurmJob(
            job_id=job_id,
            meta=meta,
            slurm_state=parts[2].strip().upper(),
            wait_status=_int(parts[1]),
            state_reason="" if reason in ("(null)", "None") else reason,
            submit_time=_epoch(parts[4]),
            start_time=_epoch(parts[5]),
            end_time=_epoch(parts[6]),
            nodes="" if parts[7].strip() in ("(null)", "") else parts[7].strip(),
        ))
    return jobs, max_id
