"""Pure conversions between SkyShift's compat types and Kubernetes objects (plain JSON dicts).

Kept apart from the adapter so every mapping (replica -> Pod or Deployment, Pod -> replica
state, node -> capacity, quantities, accelerator names) is unit-tested without a cluster. Objects
are the API's JSON as dicts, never the client's model classes: decoding a large pod list into
models is slow, and nothing here must leak a vendor type upward anyway.

Every object SkyShift creates carries these labels (selectors, adoption and the watch use them)::

    skyshift.io/managed-by=skyshift   skyshift.io/job-uid=<uid>     skyshift.io/job-name=<job>
    skyshift.io/namespace=<ns>        skyshift.io/rank=<rank>       skyshift.io/replica=<name>
    skyshift.io/attempt=<attempt>     skyshift.io/workload=pod|deployment
"""

from __future__ import annotations

import re
from datetime import datetime

from skyshift.compat.types import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    UNKNOWN,
    ReplicaSpec,
    ReplicaStatus,
)
from skyshift.models.base import Obj
from skyshift.models.quantity import Resources

MANAGED_BY = "skyshift.io/managed-by"
JOB_UID = "skyshift.io/job-uid"
JOB_NAME = "skyshift.io/job-name"
NAMESPACE = "skyshift.io/namespace"
RANK = "skyshift.io/rank"
REPLICA = "skyshift.io/replica"
ATTEMPT = "skyshift.io/attempt"
WORKLOAD = "skyshift.io/workload"  # "pod" (bare pod) or "deployment" (and its pods)
MANAGED_SELECTOR = f"{MANAGED_BY}=skyshift"
CONTAINER = "main"
GPU = "nvidia.com/gpu"
#: node labels naming the GPU model, most specific first (GPU feature discovery, GKE)
ACCELERATOR_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator")

_SUFFIX = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
    "Pi": 2.0**50, "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|([a-zA-Z]{0,2}))$")
_MODEL = re.compile(r"^([A-Z]{1,3}[0-9]{1,4}[A-Z]{0,2})(?:-|$)")


def parse_quantity(value: object) -> float:
    """A Kubernetes quantity (``"500m"``, ``"16Gi"``, ``"1e3"``, ``4``) as a plain number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    m = _QUANTITY.fullmatch(str(value).strip())
    if not m or (m.group(3) or "") not in _SUFFIX:
        raise ValueError(f"invalid Kubernetes quantity {value!r}")
    number = float(m.group(1))
    if m.group(2):
        return number * 10.0 ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def cpu_quantity(cores: float) -> str:
    return f"{round(cores * 1000)}m"


def memory_quantity(mb: float) -> str:
    """SkyShift memory is MB (10^6 bytes), which is Kubernetes' ``M``."""
    return f"{round(mb)}M" if float(mb).is_integer() else str(round(mb * 1e6))


def accelerator_name(label: str) -> str:
    """The accelerator type SkyShift matches on, from a node's GPU model label.

    ``NVIDIA-A100-SXM4-80GB`` -> ``A100``, ``Tesla-T4`` -> ``T4``, ``nvidia-tesla-v100``
    (GKE) -> ``V100``, ``NVIDIA-H100-80GB-HBM3`` -> ``H100``; anything else is kept as it is
    without the vendor prefix (``NVIDIA-GeForce-RTX-4090`` -> ``GeForce-RTX-4090``).
    """
    rest = label.strip()
    for prefix in ("nvidia-", "tesla-"):
        if rest.lower().startswith(prefix):
            rest = rest[len(prefix):]
    m = _MODEL.match(rest.upper())
    return m.group(1) if m else rest


def node_accelerator(node: Obj) -> str | None:
    labels = node.get("metadata", {}).get("labels") or {}
    for key in ACCELERATOR_LABELS:
        if labels.get(key):
            return accelerator_name(labels[key])
    return None


def node_capacity(node: Obj) -> Resources:
    """What pods may use on the node: Kubernetes' allocatable (capacity minus reservations)."""
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    gpus = int(parse_quantity(alloc.get(GPU, 0)))
    acc = node_accelerator(node)
    return Resources(
        cpus=parse_quantity(alloc.get("cpu", 0)),
        memory=parse_quantity(alloc.get("memory", 0)) / 1e6,
        gpus=gpus,
        accelerators={acc: gpus} if acc and gpus else {},
    )


def node_schedulable(node: Obj) -> bool:
    """Ready, not cordoned and without a NoSchedule/NoExecute taint that SkyShift won't tolerate."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or []):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_request(pod: Obj, accelerator: str | None = None) -> Resources:
    """Requests of a pod as the scheduler counts them: containers summed, init containers max."""

    def of(container: Obj) -> tuple[float, float, int]:
        res = container.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return (parse_quantity(req.get("cpu", 0)), parse_quantity(req.get("memory", 0)) / 1e6,
                int(parse_quantity(req.get(GPU, 0))))

    spec = pod.get("spec") or {}
    main = [of(c) for c in spec.get("containers") or []]
    init = [of(c) for c in spec.get("initContainers") or []]
    totals = [sum(x[i] for x in main) for i in range(3)]
    for i in range(3):
        totals[i] = max([totals[i], *(x[i] for x in init)])
    gpus = int(totals[2])
    return Resources(cpus=totals[0], memory=totals[1], gpus=gpus,
                     accelerators={accelerator: gpus} if accelerator and gpus else {})


# ---- replica -> objects -------------------------------------------------------------------


def replica_labels(spec: ReplicaSpec, workload: str) -> dict[str, str]:
    return {
        **spec.labels,
        MANAGED_BY: "skyshift",
        JOB_UID: spec.job_uid,
        JOB_NAME: spec.job_name,
        NAMESPACE: spec.namespace,
        RANK: str(spec.rank),
        REPLICA: spec.name,
        ATTEMPT: str(spec.attempt),
        WORKLOAD: workload,
    }


def gpu_count(spec: ReplicaSpec) -> int:
    return max(spec.resources.gpus, sum(spec.resources.accelerators.values()))


def pod_spec(
    spec: ReplicaSpec,
    *,
    image: str,
    pull_policy: str,
    restart_policy: str,
    grace_period: int,
    accelerator_values: dict[str, list[str]] | None = None,
) -> Obj:
    """The PodSpec of a replica; ``accelerator_values`` maps node label -> raw values to match."""
    envs = {
        **{str(k): str(v) for k, v in spec.envs.items()},
        "SKYSHIFT_JOB": spec.job_name,
        "SKYSHIFT_NAMESPACE": spec.namespace,
        "SKYSHIFT_RANK": str(spec.rank),
        "SKYSHIFT_REPLICA": spec.name,
    }
    res = spec.resources
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if res.cpus:
        requests["cpu"] = cpu_quantity(res.cpus)
    if res.memory:
        requests["memory"] = limits["memory"] = memory_quantity(res.memory)
    if gpus := gpu_count(spec):
        requests[GPU] = limits[GPU] = str(gpus)
    container: Obj = {
        "name": CONTAINER,
        "image": spec.image or image,
        "imagePullPolicy": pull_policy,
        "env": [{"name": k, "value": v} for k, v in envs.items()],
        "resources": {"requests": requests, "limits": limits},
    }
    if spec.run:
        container["command"] = ["/bin/sh", "-c", spec.run]
    if spec.ports:
        container["ports"] = [{"containerPort": int(p), "protocol": "TCP"} for p in spec.ports]
    out: Obj = {
        "restartPolicy": restart_policy,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": grace_period,
        "containers": [container],
    }
    if accelerator_values:
        terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": sorted(v)}]}
                 for k, v in sorted(accelerator_values.items())]
        out["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return out


def pod_manifest(spec: ReplicaSpec, pod: Obj, annotations: dict[str, str]) -> Obj:
    """A bare Pod (restartPolicy Never: SkyShift restarts by its own policy)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": spec.name, "labels": replica_labels(spec, "pod"),
                     "annotations": dict(annotations)},
        "spec": pod,
    }


def deployment_manifest(spec: ReplicaSpec, pod: Obj, annotations: dict[str, str]) -> Obj:
    """One single-replica Deployment per replica (restartPolicy Always)."""
    labels = replica_labels(spec, "deployment")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": spec.name, "labels": labels, "annotations": dict(annotations)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {JOB_UID: spec.job_uid, REPLICA: spec.name}},
            "strategy": {"type": "Recreate"},
            "template": {"metadata": {"labels": labels, "annotations": dict(annotations)},
                         "spec": pod},
        },
    }


# ---- objects -> replica status -------------------------------------------------------------


def epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _int(value: object, default: int = 0) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


def _base_status(meta: Obj, state: str) -> ReplicaStatus:
    labels = meta.get("labels") or {}
    return ReplicaStatus(
        name=str(labels.get(REPLICA) or meta.get("name") or ""),
        job_uid=labels.get(JOB_UID, ""),
        namespace=labels.get(NAMESPACE, ""),
        job_name=labels.get(JOB_NAME, ""),
        rank=_int(labels.get(RANK)),
        state=state,
        attempt=_int(labels.get(ATTEMPT)),
    )


def _main_container(status: Obj) -> Obj:
    for c in status.get("containerStatuses") or []:
        if c.get("name") == CONTAINER:
            return dict(c)
    found = status.get("containerStatuses") or [{}]
    return dict(found[0])


def pod_status(pod: Obj) -> ReplicaStatus:
    """Pod phase -> replica state, with exit code, reason and times from the container."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    container = _main_container(status)
    cstate = container.get("state") or {}
    out = _base_status(meta, PENDING)
    running = cstate.get("running") or {}
    out.started_at = epoch(running.get("startedAt") or status.get("startTime"))
    if phase in ("Succeeded", "Failed"):
        term = cstate.get("terminated") or (container.get("lastState") or {}).get("terminated")
        term = term or {}
        out.state = SUCCEEDED if phase == "Succeeded" else FAILED
        code = term.get("exitCode")
        out.exit_code = int(code) if code is not None else (0 if phase == "Succeeded" else None)
        out.reason = term.get("reason") or status.get("reason") or (
            "Completed" if phase == "Succeeded" else "Error")
        out.message = term.get("message") or status.get("message") or ""
        out.started_at = epoch(term.get("startedAt")) or out.started_at
        out.finished_at = epoch(term.get("finishedAt"))
        return out
    if phase == "Running":
        waiting = cstate.get("waiting")
        if waiting:  # restarting in place (Deployment replicas)
            out.reason, out.message = waiting.get("reason", ""), waiting.get("message", "")
            return out
        out.state = RUNNING
        return out
    if phase == "Unknown":
        out.state, out.reason = UNKNOWN, status.get("reason") or "Unknown"
        return out
    waiting = cstate.get("waiting") or {}
    if waiting.get("reason"):  # e.g. ContainerCreating, ErrImagePull, ImagePullBackOff
        out.reason, out.message = waiting.get("reason", ""), waiting.get("message", "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            out.reason = cond.get("reason") or "Unschedulable"
            out.message = cond.get("message") or ""
    return out


def deployment_placeholder(deployment: Obj) -> ReplicaStatus:
    """A Deployment whose pod does not exist (yet): the replica is Pending."""
    out = _base_status(deployment.get("metadata") or {}, PENDING)
    out.reason = "PodNotCreated"
    return out


_RANK = {RUNNING: 4, SUCCEEDED: 3, FAILED: 2, PENDING: 1, UNKNOWN: 0}


def best_pod(pods: list[Obj]) -> Obj:
    """Of several pods of one replica (a Deployment rolling over), the one to report."""
    return max(pods, key=lambda p: (_RANK[pod_status(p).state],
                                    (p.get("metadata") or {}).get("creationTimestamp") or ""))
