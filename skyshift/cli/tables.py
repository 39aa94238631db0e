"""The table of each kind: the columns users of the original SkyShift know, plus ``-o wide``.

Every function takes plain manifest dicts (as the API returns them), so unknown or missing
fields degrade to ``-``/``<none>`` instead of crashing a ``get``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from skyshift.cli.quotas import QUOTA_HEADERS, QUOTA_WIDE, quota_rows
from skyshift.cli.render import (
    NONE,
    Table,
    fmt_labels,
    fmt_list,
    fmt_ratio,
    fmt_request,
    format_age,
    sum_nodes,
)
from skyshift.cli.tables_flow import (
    PIPELINE_HEADERS,
    PIPELINE_WIDE,
    SCHEDULE_HEADERS,
    SCHEDULE_WIDE,
    pipeline_rows,
    schedule_rows,
)

Obj = Mapping[str, Any]
RowFn = Callable[[Obj, bool, datetime | None], list[list[str]]]


def _d(obj: Obj, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _age(obj: Obj, now: datetime | None) -> str:
    return format_age(_meta(obj).get("creationTimestamp"), now)


def _str(value: Any, default: str = "-") -> str:
    return default if value in (None, "") else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# -- clusters -----------------------------------------------------------------------------------

#: Used/total, as ``skyctl status`` shows them (the header says so, since the original's ``get``
#: showed available/total): "cpus: 3/8" means 3 of 8 CPUs are taken.
CLUSTER_HEADERS = ["NAME", "MANAGER", "LABELS", "RESOURCES (USED/TOTAL)", "STATUS", "AGE"]
CLUSTER_WIDE = ["INFRA", "CLOUD", "REGION", "NODES", "MESSAGE"]


def cluster_resources(obj: Obj) -> tuple[dict[str, float], dict[str, float]]:
    """``(available, total)`` summed over the cluster's nodes."""
    return sum_nodes(_d(obj, "status", "allocatable")), sum_nodes(_d(obj, "status", "capacity"))


def used(avail: Mapping[str, float], total: Mapping[str, float]) -> dict[str, float]:
    """What is taken of each resource: total minus available, never below zero."""
    return {k: max(total[k] - avail.get(k, 0.0), 0.0) for k in total}


def cluster_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    avail, total = cluster_resources(obj)
    row = [
        _str(_meta(obj).get("name")),
        _str(_d(obj, "spec", "manager")),
        fmt_labels(_meta(obj).get("labels"), sep="\n"),
        fmt_ratio(used(avail, total), total),
        _str(_d(obj, "status", "phase"), "Init"),
        _age(obj, now),
    ]
    if wide:
        capacity = _d(obj, "status", "capacity")
        nodes = len(capacity) if isinstance(capacity, Mapping) else 0
        prov = _d(obj, "status", "provision")
        if isinstance(prov, Mapping):  # a provisioned cluster: nodes UP at SkyPilot
            nodes = _int(prov.get("nodes"))
        infra = (prov.get("infra") if isinstance(prov, Mapping) else None) or _d(
            obj, "spec", "provision", "infra")
        row += [
            _str(infra),
            _str(_d(obj, "spec", "cloud")),
            _str(_d(obj, "spec", "region")),
            str(nodes),
            _str(_d(obj, "status", "message")),
        ]
    return [row]


# -- jobs ---------------------------------------------------------------------------------------

JOB_HEADERS = ["NAME", "CLUSTER", "REPLICAS", "RESOURCES", "NAMESPACE", "STATUS", "AGE"]
JOB_WIDE = ["RESTARTS", "PRIORITY", "MESSAGE"]


#: Job phases that outrank the per-cluster counts: once the job has ended (or is being torn
#: down) a replica still counted Pending will never run, so its row says what the job is.
FINAL_PHASES = ("Succeeded", "Failed", "Deleting")


def replica_state(counts: Mapping[str, Any], phase: str) -> str:
    """The state of a job's replicas on one cluster, from its per-state counts; a finished job's
    rows agree with its phase."""
    if phase in FINAL_PHASES:
        return phase
    running, pending = _int(counts.get("Running")), _int(counts.get("Pending"))
    succeeded, failed = _int(counts.get("Succeeded")), _int(counts.get("Failed"))
    if running:
        return "Running"
    if pending:
        return "Pending"
    if failed:
        return "Failed"
    if succeeded:
        return "Succeeded"
    return phase


def job_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    """One row per cluster the job has replicas on; one row with CLUSTER ``-`` if none."""
    meta = _meta(obj)
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    phase = _str(status.get("phase"), "Pending")
    replicas = _int(_d(obj, "spec", "replicas") if _d(obj, "spec", "replicas") is not None else 1)
    res = fmt_request(_d(obj, "spec", "resources"))
    counts_by_cluster = status.get("replicaStatus") or {}
    placement = status.get("placement") or {}
    clusters = list(counts_by_cluster) + [c for c in placement if c not in counts_by_cluster]
    extra = (
        [str(_int(status.get("restarts"))), str(_int(_d(obj, "spec", "priority"))),
         _str(status.get("message"))]
        if wide
        else []
    )
    name, ns, age = _str(meta.get("name")), _str(meta.get("namespace")), _age(obj, now)
    if not clusters:
        return [[name, "-", f"0/{replicas}", res, ns, phase, age, *extra]]
    rows = []
    for cluster in clusters:
        counts = counts_by_cluster.get(cluster) or {}
        total = sum(_int(v) for v in counts.values()) or _int(placement.get(cluster))
        active = _int(counts.get("Running")) + _int(counts.get("Succeeded"))
        state = replica_state(counts, phase)
        rows.append([name, str(cluster), f"{active}/{total}", res, ns, state, age, *extra])
    return rows


# -- services, endpoints ------------------------------------------------------------------------

SERVICE_HEADERS = [
    "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORTS", "CLUSTER", "STATUS", "NAMESPACE", "AGE",
]
SERVICE_WIDE = ["SELECTOR", "LINKED"]


def fmt_ports(ports: Sequence[Any] | None) -> str:
    out = []
    for p in ports or []:
        if not isinstance(p, Mapping):
            continue
        target = p.get("targetPort") or p.get("nodePort")
        port = f"{p.get('port')}:{target}" if target else str(p.get("port"))
        out.append(f"{port}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) or NONE


def service_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    stype = _str(spec.get("type"), "ClusterIP")
    external = _d(obj, "status", "externalIP") or ("<pending>" if stype == "LoadBalancer" else NONE)
    row = [
        _str(_meta(obj).get("name")),
        stype,
        _str(_d(obj, "status", "clusterIP") or spec.get("clusterIP"), NONE),
        str(external),
        fmt_ports(spec.get("ports")),
        _str(_d(obj, "status", "cluster") or spec.get("primaryCluster")),
        _str(_d(obj, "status", "phase"), "Pending"),  # Deleting shows a delete in progress
        _str(_meta(obj).get("namespace")),
        _age(obj, now),
    ]
    if wide:
        row += [fmt_labels(spec.get("selector")), fmt_linked(_d(obj, "status", "reachable"))]
    return [row]


def fmt_linked(reachable: Any) -> str:
    """``cluster=address`` of each linked cluster the service has a copy on."""
    out = [f"{r.get('cluster')}={r.get('clusterIP') or NONE}" for r in reachable or []
           if isinstance(r, Mapping) and r.get("role") == "linked"]
    return ",".join(out) or NONE


ENDPOINTS_HEADERS = ["NAME", "NAMESPACE", "SELECTOR", "PRIMARY-CLUSTER", "ENDPOINTS", "AGE"]


def endpoints_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    eps = _d(obj, "spec", "endpoints") or {}
    lines = [
        f"{cluster}: {_int(e.get('num_endpoints'))}"
        + (" (exposed)" if e.get("exposed_to_cluster") else "")
        for cluster, e in eps.items()
        if isinstance(e, Mapping)
    ]
    return [[
        _str(_meta(obj).get("name")),
        _str(_meta(obj).get("namespace")),
        fmt_labels(_d(obj, "spec", "selector")),
        _str(_d(obj, "spec", "primary_cluster")),
        "\n".join(lines) or NONE,
        _age(obj, now),
    ]]


# -- policies, links, namespaces, roles ---------------------------------------------------------

FILTER_HEADERS = ["NAME", "INCLUDE", "EXCLUDE", "LABELS", "NAMESPACE", "AGE"]


def filter_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    return [[
        _str(_meta(obj).get("name")),
        fmt_list(_d(obj, "spec", "clusterFilter", "include")),
        fmt_list(_d(obj, "spec", "clusterFilter", "exclude")),
        fmt_labels(_d(obj, "spec", "labelsSelector")),
        _str(_meta(obj).get("namespace")),
        _age(obj, now),
    ]]


LINK_HEADERS = ["NAME", "SOURCE", "TARGET", "STATUS", "AGE"]


def link_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    row = [
        _str(_meta(obj).get("name")),
        _str(_d(obj, "spec", "source_cluster")),
        _str(_d(obj, "spec", "target_cluster")),
        _str(_d(obj, "status", "phase"), "Init"),
        _age(obj, now),
    ]
    if wide:
        gateway = _d(obj, "spec", "gateway") or {}
        where = f"{gateway.get('address')}:{gateway.get('port')}" if gateway else "direct"
        row += [where, " ".join(_str(_d(obj, "status", "message")).split())]
    return [row]


NAMESPACE_HEADERS = ["NAME", "STATUS", "AGE"]


def namespace_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    return [[_str(_meta(obj).get("name")), _str(_d(obj, "status", "phase"), "Active"),
             _age(obj, now)]]


ROLE_HEADERS = ["NAME", "RULES", "NAMESPACES", "USERS", "AGE"]


def role_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    rules = [
        f"{fmt_list(r.get('actions'))} on {fmt_list(r.get('resources'))}"
        for r in _d(obj, "spec", "rules") or []
        if isinstance(r, Mapping)
    ]
    return [[
        _str(_meta(obj).get("name")),
        "\n".join(rules) or NONE,
        fmt_list(_d(obj, "spec", "namespaces")),
        fmt_list(_d(obj, "spec", "users")),
        _age(obj, now),
    ]]


USER_HEADERS = ["NAME", "EMAIL", "ROLES", "AGE"]


def user_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    return [[
        _str(_meta(obj).get("name")),
        _str(_d(obj, "spec", "email") or None),
        _str(_d(obj, "status", "roles") or None),
        _age(obj, now),
    ]]


GENERIC_HEADERS = ["NAME", "NAMESPACE", "AGE"]


def generic_rows(obj: Obj, wide: bool, now: datetime | None) -> list[list[str]]:
    return [[_str(_meta(obj).get("name")), _str(_meta(obj).get("namespace")), _age(obj, now)]]


VIEWS: dict[str, tuple[list[str], list[str], RowFn]] = {
    "Cluster": (CLUSTER_HEADERS, CLUSTER_WIDE, cluster_rows),
    "Job": (JOB_HEADERS, JOB_WIDE, job_rows),
    "Pipeline": (PIPELINE_HEADERS, PIPELINE_WIDE, pipeline_rows),
    "Schedule": (SCHEDULE_HEADERS, SCHEDULE_WIDE, schedule_rows),
    "Service": (SERVICE_HEADERS, SERVICE_WIDE, service_rows),
    "Endpoints": (ENDPOINTS_HEADERS, [], endpoints_rows),
    "FilterPolicy": (FILTER_HEADERS, [], filter_rows),
    "Quota": (QUOTA_HEADERS, QUOTA_WIDE, quota_rows),
    "Link": (LINK_HEADERS, ["GATEWAY", "MESSAGE"], link_rows),
    "Namespace": (NAMESPACE_HEADERS, [], namespace_rows),
    "Role": (ROLE_HEADERS, [], role_rows),
    "User": (USER_HEADERS, [], user_rows),
}


def headers(kind: str, wide: bool = False) -> list[str]:
    base, extra, _ = VIEWS.get(kind, (GENERIC_HEADERS, [], generic_rows))
    return base + (extra if wide else [])


def rows(kind: str, obj: Obj, wide: bool = False, now: datetime | None = None) -> list[list[str]]:
    _, _, fn = VIEWS.get(kind, (GENERIC_HEADERS, [], generic_rows))
    return fn(obj, wide, now)


def build_table(
    kind: str, items: Sequence[Obj], wide: bool = False, now: datetime | None = None
) -> Table:
    """The table of ``items`` (all of one kind); STATUS is marked for colouring."""
    hdrs = headers(kind, wide)
    table = Table(hdrs, status_col=hdrs.index("STATUS") if "STATUS" in hdrs else None)
    for obj in items:
        table.rows.extend(rows(kind, obj, wide, now))
    return table
