"""Manifest dicts -> lifecycle payloads, and the pure status arithmetic the writers share.

The API starter, the reconciler and the store activities all turn a stored Job/Cluster into a
workflow input the same way; the placement activity, the skylet and the job workflow all merge
status fields the same way. Keeping that here (pure functions, no I/O) means one definition and
unit-testable rules; the pydantic models validate, the workflows only ever see dataclasses.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from skyshift.compat.kind import fill_config
from skyshift.contract.jobs import (
    REVISION,
    ClusterInput,
    JobConfig,
    JobInput,
    JobTemplate,
    ReplicaUpdate,
    all_succeeded_message,
)
from skyshift.contract.pipelines import OWNER_ANNOTATION
from skyshift.contract.provision import ProvisionState, plan_of
from skyshift.lifecycle.envs import redact
from skyshift.models.base import Obj
from skyshift.models.job import Job
from skyshift.models.meta import now_iso
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import Expression, Filter, NodeInfo, Preference, QueueInfo

COUNT_STATES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def parse_time(value: object) -> float:
    """RFC 3339 timestamp -> epoch seconds (0.0 when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _exprs(items: list[Any]) -> list[Expression]:
    return [Expression(e.key, e.operator, list(e.values)) for e in items]


def template_from_job(job: Job) -> JobTemplate:
    spec = job.spec
    return JobTemplate(
        image=spec.image,
        run=spec.run,
        envs=redact(spec.envs),  # values stay in etcd, out of Temporal history
        ports=list(spec.ports),
        resources=spec.resources.to_resources(),
        replicas=spec.replicas,
        restart_policy=spec.restartPolicy,
        max_restarts=spec.maxRestarts,
        priority=spec.priority,
        filters=[
            Filter(f.name, dict(f.matchLabels), _exprs(f.matchExpressions))
            for f in spec.placement.filters
        ],
        preferences=[
            Preference(p.name, dict(p.matchLabels), _exprs(p.matchExpressions), p.weight)
            for p in spec.placement.preferences
        ],
        labels=dict(job.metadata.labels),
        preemption_policy=spec.preemptionPolicy,
    )


def validation_summary(exc: ValidationError) -> str:
    """The first few field errors of a manifest, as one line ("spec.x: why; ...")."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
    )


def parse_job(obj: Obj) -> tuple[JobTemplate | None, str]:
    """(template, "") for a valid Job manifest, (None, why) for one that can never run."""
    try:
        job = Job.model_validate(obj)
    except ValidationError as exc:
        return None, f"invalid job spec: {validation_summary(exc)}"
    return template_from_job(job), ""


def status_clusters(obj: Obj) -> list[str]:
    status = obj.get("status") or {}
    names = set((status.get("placement") or {}).keys())
    names |= set((status.get("replicaStatus") or {}).keys())
    return sorted(names)


def identity(obj: Obj) -> dict[str, Any]:
    """The fields every versioned workflow input starts with: the object's namespace ("default"
    if unset), name, uid and generation."""
    meta = obj.get("metadata") or {}
    return {"namespace": str(meta.get("namespace") or "default"), "name": str(meta.get("name")),
            "uid": str(meta.get("uid") or ""), "generation": int(meta.get("generation") or 0)}


def job_input(obj: Obj, config: JobConfig | None = None) -> JobInput:
    meta = obj.get("metadata") or {}
    template, invalid = parse_job(obj)
    return JobInput(
        **identity(obj),
        created=parse_time(meta.get("creationTimestamp")),
        template=template,
        invalid=invalid,
        phase=str((obj.get("status") or {}).get("phase") or "Pending"),
        clusters=status_clusters(obj),
        deleting=bool(meta.get("deletionTimestamp")),
        config=config or JobConfig(),
        owner=str((meta.get("annotations") or {}).get(OWNER_ANNOTATION) or ""),
        revision=REVISION,
    )


def cluster_input(obj: Obj) -> ClusterInput:
    meta = obj.get("metadata") or {}
    plan = plan_of(obj.get("spec") or {})
    return ClusterInput(
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        phase=str((obj.get("status") or {}).get("phase") or "Init"),
        deleting=bool(meta.get("deletionTimestamp")),
        provision=ProvisionState(plan) if plan is not None else None,
    )


def manager_config(obj: Obj) -> tuple[str, dict[str, Any]]:
    """(manager, adapter config) for ``create_manager``.

    ``spec.config`` wins; the Cluster's other fields fill in what it leaves out, under the names
    the manager's adapter takes (each manager's ``fill``, ``compat/<manager>/__init__.py``):
    declared capacity for ``local``, ``config_path``/``context`` as the kubeconfig and its
    context for ``k8``, ``config_path`` as ``slurm_conf`` and ``access_config`` (host, username,
    ssh_key_path) as the login node for ``slurm``, the launched SkyPilot clusters for
    ``skypilot``. A ``ray`` cluster has everything in ``spec.config`` (``address``: its
    dashboard, from ``skyctl create cluster --address``). Labels go in as ``labels``.
    """
    spec = obj.get("spec") or {}
    manager = str(spec.get("manager") or "local")
    config = fill_config(manager, spec, obj.get("status") or {})
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels and "labels" not in config:
        config["labels"] = dict(labels)
    return manager, config


def nodes_from_status(status: Obj) -> list[NodeInfo]:
    alloc = status.get("allocatable") or {}
    cap = status.get("capacity") or {}
    return [NodeInfo(name, Resources.from_dict(res),
                     Resources.from_dict(cap[name]) if name in cap else None)
            for name, res in sorted(alloc.items())]


def queue_from_status(status: Obj) -> QueueInfo | None:
    """A batch cluster's queue as the skylet wrote it (``status.queue``): room = limit minus
    what pends there. None for a cluster without one."""
    queue = status.get("queue")
    if not isinstance(queue, dict):
        return None
    limit = Resources.from_dict(queue.get("limit"))
    queued = Resources.from_dict(queue.get("queued"))
    jobs = queue.get("jobs", 0)
    return QueueInfo(limit - queued, int(jobs) if isinstance(jobs, int) else 0)


def counts_of(updates: list[ReplicaUpdate]) -> dict[str, int]:
    counts = dict.fromkeys(COUNT_STATES, 0)
    for u in updates:
        counts[u.state if u.state in counts else "Unknown"] += 1
    return counts


TRIM_ORDER = ("Unknown", "Failed", "Pending", "Succeeded", "Running")  # dropped first to last


def _trim(counts: dict[str, Any], excess: int) -> int:
    """Take up to ``excess`` off ``counts`` (in place), least telling states first; returns
    what is still to take."""
    for state in TRIM_ORDER:
        take = min(excess, int(counts.get(state, 0)))
        if take > 0:
            counts[state] = int(counts[state]) - take
            excess -= take
    return excess


def cap_counts(per_cluster: dict[str, Any], desired: int, first: str | None = None,
               placement: dict[str, Any] | None = None) -> bool:
    """Trim ``status.replicaStatus`` in place so it counts at most ``desired`` replicas; True
    when something was trimmed.

    The counts come from each cluster's skylet, and nothing forces them to add up: two
    Cluster objects attached to one physical cluster both listed its pods (issue 31: a
    6-replica job reported "8 replicas started"), and a cluster that was lost keeps the counts
    it last wrote while its replicas start elsewhere. So the total is bounded where it is
    written. The excess comes off, in turn: clusters the job's ``placement`` no longer names
    (stale counts), what a cluster counts beyond its share of the placement, then ``first``
    (the cluster being written, whose report made the total too large) and the others by
    name. Within a cluster the least telling states go first (Unknown, Failed, Pending, then
    Succeeded, Running last). A cluster left with nothing is dropped."""
    desired = max(desired, 0)
    excess = sum(sum(int(v) for v in c.values()) for c in per_cluster.values()) - desired
    if excess <= 0:
        return False
    shares = {str(k): int(v) for k, v in (placement or {}).items()
              if isinstance(v, int) and not isinstance(v, bool)}
    passes: list[tuple[str, int]] = []  # (cluster, the most to leave it) in order
    if shares:
        passes += [(name, 0) for name in sorted(per_cluster) if name not in shares]
        passes += [(name, shares[name]) for name in sorted(per_cluster) if name in shares]
    passes += [(name, 0) for name in sorted(per_cluster, key=lambda n: (n != first, n))]
    for name, keep in passes:
        if excess <= 0:
            break
        if name not in per_cluster:
            continue
        counts = dict(per_cluster[name])
        over = sum(int(v) for v in counts.values()) - keep
        if over <= 0:
            continue
        take = min(excess, over)
        excess -= take - _trim(counts, take)
        if any(counts.values()):
            per_cluster[name] = counts
        else:
            del per_cluster[name]
    return True


def desired_replicas(obj: Obj) -> int:
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1


def merge_counts(obj: Obj, cluster: str, counts: dict[str, int]) -> Obj | None:
    """Set ``status.replicaStatus[cluster]``; move Pending/Scheduled to Running once every
    desired replica has started. None when nothing changes (no rewrite of unchanged objects).
    The counts never add up to more than ``spec.replicas`` (``cap_counts``)."""
    status = obj.setdefault("status", {})
    per_cluster = status.setdefault("replicaStatus", {})
    before = {c: dict(v) for c, v in per_cluster.items()}
    if not any(counts.values()):
        per_cluster.pop(cluster, None)
    else:
        per_cluster[cluster] = dict(counts)
    desired = desired_replicas(obj)
    cap_counts(per_cluster, desired, cluster, status.get("placement"))
    changed = per_cluster != before
    started = sum(c.get("Running", 0) + c.get("Succeeded", 0) for c in per_cluster.values())
    if status.get("phase", "Pending") in ("Pending", "Scheduled") and started >= desired > 0:
        status["phase"] = "Running"
        status["message"] = f"{min(started, desired)} replicas started"
        status["startTime"] = status.get("startTime") or now_iso()
        changed = True
    if all_succeeded(obj, per_cluster, desired):
        status["phase"] = "Succeeded"
        status["message"] = all_succeeded_message(desired)
        status["completionTime"] = status.get("completionTime") or now_iso()
        changed = True
    return obj if changed else None


def all_succeeded(obj: Obj, per_cluster: dict[str, Any], desired: int) -> bool:
    """Every desired replica is counted Succeeded, in a job that ends when they have (not
    restartPolicy Always), running and not being deleted: the verdict its workflow reaches on
    the same reports (``workflows.jobstate.verdict``), written by the skylet that counts the
    last one, so the workflow need not write it (``ReplicaReport.finished``)."""
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    if spec.get("restartPolicy") == "Always" or (obj.get("metadata") or {}).get(
            "deletionTimestamp"):
        return False
    if status.get("phase") not in ("Pending", "Scheduled", "Running"):
        return False
    succeeded = sum(int(c.get("Succeeded", 0)) for c in per_cluster.values())
    return desired > 0 and succeeded >= desired
