"""The JobWorkflow's bookkeeping as pure functions over :class:`JobState`.

Deterministic, I/O-free and Temporal-free, so the rules (which report counts, when a replica is
restarted, what a lost cluster moves, when a job is done) are read and unit-tested in one place
and the workflow module only sequences activities, timers and signals around them.
"""

from __future__ import annotations

from skyshift.compat.types import ReplicaSpec
from skyshift.contract.jobs import (
    FAILED,
    PENDING,
    RESTARTING,
    RUNNING,
    SUCCEEDED,
    UNPLACED,
    JobConfig,
    JobInput,
    JobState,
    JobTemplate,
    Placement,
    ReplicaRecord,
    ReplicaUpdate,
    all_succeeded_message,
    replica_name,
)

FINISHED = (SUCCEEDED, FAILED)


def backoff(cfg: JobConfig, restart: int) -> float:
    """Seconds before restart number ``restart`` (1-based): base, 2x base, ... up to max."""
    return float(min(cfg.backoff_base * 2 ** max(restart - 1, 0), cfg.backoff_max))


def name_of(inp: JobInput, rank: int) -> str:
    return replica_name(inp.name, inp.uid, rank)


def replica_spec(inp: JobInput, t: JobTemplate, rec: ReplicaRecord) -> ReplicaSpec:
    return ReplicaSpec(
        name=name_of(inp, rec.rank), job_name=inp.name, namespace=inp.namespace,
        job_uid=inp.uid, rank=rec.rank, image=t.image, run=t.run, envs=dict(t.envs),
        ports=list(t.ports), resources=t.resources, restart_policy=t.restart_policy,
        labels=dict(t.labels), attempt=rec.attempt,
    )


def unplaced(s: JobState) -> list[ReplicaRecord]:
    return [r for r in s.replicas if r.state == UNPLACED]


def to_submit(s: JobState) -> dict[str, list[ReplicaRecord]]:
    """Placed replicas not yet submitted, by cluster."""
    out: dict[str, list[ReplicaRecord]] = {}
    for r in s.replicas:
        if r.cluster and r.state == PENDING and not r.submitted:
            out.setdefault(r.cluster, []).append(r)
    return out


def placement_of(s: JobState) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in s.replicas:
        if r.cluster:
            out[r.cluster] = out.get(r.cluster, 0) + 1
    return out


def counts_by_cluster(s: JobState) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in s.replicas:
        if not r.cluster:
            continue
        c = out.setdefault(r.cluster, dict.fromkeys(
            ("Pending", "Running", "Succeeded", "Failed", "Unknown"), 0))
        state = r.state if r.state in c else "Pending"
        c[state] += 1
    return out


def primary_cluster(s: JobState) -> str:
    placed = placement_of(s)
    return max(sorted(placed), key=lambda c: placed[c]) if placed else ""


def assign(s: JobState, p: Placement) -> list[str]:
    """Give the unplaced ranks the clusters of placement ``p``; returns the clusters used."""
    if p.seq != s.awaiting:
        return []
    s.awaiting = 0
    waiting = unplaced(s)
    used = []
    for cluster, n in p.assignments.items():
        for rec in waiting[:n]:
            rec.cluster, rec.state, rec.message, rec.submitted = cluster, PENDING, "", False
        waiting = waiting[n:]
        used.append(cluster)
    if s.phase == "Pending" and used:
        s.phase = "Scheduled"
    return used


def submitted(s: JobState, cluster: str, ranks: list[int]) -> None:
    """Mark replicas as handed to the cluster (kept out of ``to_submit`` from now on)."""
    for r in s.replicas:
        if r.rank in ranks and r.cluster == cluster:
            r.submitted = True


def order_again(s: JobState, clusters: set[str]) -> None:
    """Replicas on ``clusters`` not known to have started are ordered again (their orders were
    withdrawn; one carried out already makes the new order a no-op: submit is idempotent)."""
    for r in s.replicas:
        if r.cluster in clusters and r.state == PENDING:
            r.submitted = False


def apply_update(
    s: JobState, t: JobTemplate, cfg: JobConfig, cluster: str, u: ReplicaUpdate, now: float
) -> str | None:
    """Apply one replica state from ``cluster``; returns a fatal message when the job fails."""
    if u.rank >= len(s.replicas):
        return None
    rec = s.replicas[u.rank]
    if rec.cluster != cluster or rec.attempt != u.attempt or rec.state in (RESTARTING, UNPLACED):
        return None  # stale: an older attempt, or a cluster the replica moved away from
    if rec.state in FINISHED:
        return None  # finished states are final for an attempt
    rec.message = u.message or u.reason
    if u.state not in FINISHED:
        rec.state = u.state
        return None
    rec.exit_code = u.exit_code
    if u.state == SUCCEEDED and t.restart_policy != "Always":
        rec.state = SUCCEEDED
        return None
    what = "exited" if u.state == SUCCEEDED else "failed"
    detail = u.message or u.reason or (f"exit code {u.exit_code}" if u.exit_code else "")
    if t.restart_policy == "Never":
        rec.state = FAILED
        return f"replica {u.rank} {what} ({detail}); restartPolicy is Never"
    if s.restarts >= t.max_restarts:
        rec.state = FAILED
        return f"replica {u.rank} {what} ({detail}) and maxRestarts ({t.max_restarts}) is reached"
    s.restarts += 1
    rec.state, rec.restart_at = RESTARTING, now + backoff(cfg, s.restarts)
    s.message = f"replica {u.rank} {what} ({detail}); restart {s.restarts}/{t.max_restarts}"
    return None


def due_restarts(s: JobState, now: float) -> list[ReplicaRecord]:
    """Restarts whose backoff has passed: bump the attempt and queue the submit."""
    due = [r for r in s.replicas if r.state == RESTARTING and r.restart_at <= now]
    for r in due:
        r.attempt += 1
        r.state, r.exit_code, r.message, r.restart_at = PENDING, None, "", 0.0
        r.submitted = False
    return due


def next_restart(s: JobState) -> float | None:
    times = [r.restart_at for r in s.replicas if r.state == RESTARTING]
    return min(times) if times else None


def cluster_gone(s: JobState, inp: JobInput, cluster: str, kind: str) -> int:
    """Move every unfinished replica off a lost (or deleted) cluster; returns how many moved.
    Replicas of a lost cluster are remembered as leftovers to delete when it returns."""
    moved = 0
    for r in s.replicas:
        if r.cluster != cluster or r.state in FINISHED:
            continue
        if kind == "lost":
            s.leftovers.setdefault(cluster, []).append(name_of(inp, r.rank))
        r.cluster, r.state, r.message, r.exit_code, r.restart_at = "", UNPLACED, "", None, 0.0
        r.submitted = False
        moved += 1
    if moved:
        s.awaiting = 0  # ask again, for all unplaced replicas
        s.message = f"cluster {cluster} {kind}: moving {moved} replicas elsewhere"
    return moved


def evicted(s: JobState, why: str) -> int:
    """Preempted: every unfinished replica goes back to the queue (its attempt bumped, so a
    late report of the deleted one is stale); returns how many."""
    moved = 0
    for r in s.replicas:
        if r.cluster and r.state not in FINISHED:
            r.cluster, r.state, r.message, r.exit_code, r.restart_at = "", UNPLACED, "", None, 0.0
            r.attempt, r.submitted = r.attempt + 1, False
            moved += 1
    if moved:
        s.awaiting = 0
        s.phase, s.message = PENDING, why
    return moved


def leftovers_to_delete(s: JobState, inp: JobInput, cluster: str) -> list[str]:
    """Names on a recovered cluster that moved away (a rank placed back there is kept)."""
    names = s.leftovers.pop(cluster, [])
    here = {name_of(inp, r.rank) for r in s.replicas if r.cluster == cluster}
    return sorted(n for n in set(names) if n not in here)


def scale(s: JobState, inp: JobInput, replicas: int) -> dict[str, list[str]]:
    """Resize to ``replicas`` ranks; returns the names to delete per cluster."""
    doomed: dict[str, list[str]] = {}
    for r in s.replicas[replicas:]:
        if r.cluster:
            doomed.setdefault(r.cluster, []).append(name_of(inp, r.rank))
    del s.replicas[replicas:]
    for rank in range(len(s.replicas), replicas):
        s.replicas.append(ReplicaRecord(rank))
    if unplaced(s):
        s.awaiting = 0
    return doomed


def all_started(s: JobState) -> bool:
    return bool(s.replicas) and all(r.state in (RUNNING, SUCCEEDED) for r in s.replicas)


def verdict(s: JobState, t: JobTemplate) -> tuple[str, str] | None:
    """("Succeeded", message) once every replica succeeded (never for Always)."""
    if t.restart_policy == "Always" or not s.replicas:
        return None
    if all(r.state == SUCCEEDED for r in s.replicas):
        return "Succeeded", all_succeeded_message(len(s.replicas))
    return None


def live_by_cluster(s: JobState, inp: JobInput) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in s.replicas:
        if r.cluster and r.state not in FINISHED:
            out.setdefault(r.cluster, []).append(name_of(inp, r.rank))
    return out
