"""``skyctl describe KIND NAME``: everything about one object, for a human asking "why?".

Beyond the fields it shows what ``get`` cannot: condition history, per-cluster scheduler reasons
of a pending job, per-node resources of a cluster, and the link to the object's lifecycle
workflow in the Temporal UI.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import click

from skyshift.cli.object_args import object_command
from skyshift.cli.output import to_yaml
from skyshift.cli.render import (
    Table,
    fmt_labels,
    fmt_ratio,
    format_age,
    printable,
    sum_nodes,
)
from skyshift.cli.state import CliState
from skyshift.cli.tables_flow import dag_table, next_runs
from skyshift.models import KindInfo

DEFAULT_TEMPORAL_UI = "http://127.0.0.1:8233"
# Shown in their own sections, so left out of the generic status dump.
STATUS_SECTIONS = ("conditions", "schedulerReasons", "workflowId", "capacity", "allocatable",
                   "steps", "nextRunTimes", "reachable")


def temporal_ui_link(workflow_id: str, context_ui: str = "") -> str:
    """The workflow's page in the Temporal UI: ``SKYSHIFT_TEMPORAL_UI``, else the context's
    (``skyshift up`` records where it put the UI), else the default local one."""
    ui = (os.environ.get("SKYSHIFT_TEMPORAL_UI") or context_ui or DEFAULT_TEMPORAL_UI).rstrip("/")
    ns = os.environ.get("SKYSHIFT_TEMPORAL_NAMESPACE") or "default"
    return f"{ui}/namespaces/{quote(ns, safe='')}/workflows/{quote(workflow_id, safe='')}"


def _indent(text: str, by: int = 2) -> str:
    pad = " " * by
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").split("\n"))


def _field(label: str, value: Any) -> str:
    return f"{label + ':':<18}{'' if value is None else value}"


def _section(title: str, body: str) -> list[str]:
    return [f"{title}:", _indent(body)] if body.strip() else [f"{title}:  <none>"]


def conditions_table(conditions: list[Any]) -> str:
    table = Table(["TYPE", "STATUS", "REASON", "MESSAGE", "AGE"])
    for c in conditions:
        if isinstance(c, Mapping):
            table.rows.append([
                str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or "-"),
                " ".join(str(c.get("message") or "-").split()),
                format_age(c.get("lastTransitionTime")),
            ])
    return table.render() if table.rows else ""


def reachable_table(reachable: Any) -> str:
    """A service's clusters: the primary and the linked ones with a copy, at which address."""
    table = Table(["CLUSTER", "ROLE", "CLUSTER-IP", "EXTERNAL-IP"])
    for r in reachable or []:
        if isinstance(r, Mapping):
            table.rows.append([str(r.get("cluster", "")), str(r.get("role", "")),
                               str(r.get("clusterIP") or "<none>"),
                               str(r.get("externalIP") or "<none>")])
    return table.render() if table.rows else ""


def node_resources(status: Mapping[str, Any]) -> str:
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    table = Table(["NODE", "AVAILABLE/TOTAL"])
    for node in capacity:
        avail = sum_nodes({node: allocatable.get(node) or {}})
        table.rows.append([str(node), fmt_ratio(avail, sum_nodes({node: capacity[node]}))])
    return table.render() if table.rows else ""


def missing_clusters_text(obj: Mapping[str, Any], clusters: set[str]) -> str:
    """What a FilterPolicy names that does not exist, and what that does to its jobs."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    filt = spec.get("clusterFilter") if isinstance(spec.get("clusterFilter"), Mapping) else {}
    assert isinstance(filt, Mapping)
    lines = []
    for part, effect in (("include", "jobs it selects can only go to the others"),
                         ("exclude", "excluding them has no effect")):
        gone = sorted(str(c) for c in filt.get(part) or [] if str(c) not in clusters)
        if gone:
            lines.append(f"{part} names clusters that do not exist: {', '.join(gone)} ({effect})")
    named = [str(c) for c in filt.get("include") or []]
    if named and all(c not in clusters for c in named):
        lines.append("no included cluster exists: every job this policy selects stays Pending")
    return "\n".join(lines)


def describe_text(info: KindInfo, obj: Mapping[str, Any],
                  clusters: set[str] | None = None, temporal_ui: str = "") -> str:
    """The full description of one object as text (``clusters``: the names that exist, to
    explain a FilterPolicy that names missing ones; ``temporal_ui``: the context's UI)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    created = meta.get("creationTimestamp")
    lines = [_field("Name", meta.get("name")), _field("Kind", info.kind)]
    if info.namespaced:
        lines.append(_field("Namespace", meta.get("namespace")))
    lines += [
        _field("Labels", fmt_labels(meta.get("labels"), sep="\n" + " " * 18)),
        _field("Annotations", fmt_labels(meta.get("annotations"), sep="\n" + " " * 18)),
        _field("UID", meta.get("uid")),
        _field("Resource Version", meta.get("resourceVersion")),
        _field("Generation", meta.get("generation")),
        _field("Created", f"{created} ({format_age(created)} ago)" if created else "<unknown>"),
    ]
    if meta.get("deletionTimestamp"):
        lines.append(_field("Deleting Since", meta["deletionTimestamp"]))
    spec = obj.get("spec")
    lines += _section("Spec", to_yaml(spec) if spec else "")
    rest = {k: v for k, v in status.items() if k not in STATUS_SECTIONS}
    lines += _section("Status", to_yaml(rest) if rest else "")
    if info.kind == "Cluster":
        lines += _section("Resources", node_resources(status))
    if info.kind == "Job":
        reasons = status.get("schedulerReasons") or {}
        table = Table(["CLUSTER", "REASON"], [[str(c), str(r)] for c, r in reasons.items()])
        lines += _section("Scheduler Reasons", table.render() if table.rows else "")
    if info.kind == "Service":
        lines += _section("Reachable On", reachable_table(status.get("reachable")))
    if info.kind == "Pipeline":
        lines += _section("Steps", dag_table(obj))
    if info.kind == "Schedule":
        lines += _section("Next Runs", next_runs(obj))
    if info.kind == "FilterPolicy" and clusters is not None:
        lines += _section("Problems", missing_clusters_text(obj, clusters))
    lines += _section("Conditions", conditions_table(list(status.get("conditions") or [])))
    workflow_id = status.get("workflowId")
    if workflow_id:
        lines += ["Workflow:", _indent(_field("ID", workflow_id)),
                  _indent(_field("Temporal UI", temporal_ui_link(str(workflow_id), temporal_ui)))]
    return "\n".join(lines)


@object_command("describe")
def describe(state: CliState, kind: KindInfo, name: str, namespace: str | None) -> None:
    """Show every field of an object, its conditions, and (for jobs) why it is where it is.

    \b
    Examples:
      skyctl describe job train
      skyctl describe cluster kind-1
    """
    ns = state.namespace(namespace) if kind.namespaced else None
    client = state.client()
    obj = client.get(kind.kind, name, ns)
    clusters = None
    if kind.kind == "FilterPolicy":
        clusters = {str((c.get("metadata") or {}).get("name"))
                    for c in client.list("Cluster").get("items", [])}
    ui = state.current_context().temporal_ui
    click.echo(printable(describe_text(kind, obj, clusters, ui), keep_newlines=True))
