"""``skyctl status``: the super-cluster at a glance, as the original showed it.

Clusters with used/total resources, one merged row summing the Ready clusters (what a job can
count on), and the newest active jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from skyshift.cli.output import print_table
from skyshift.cli.render import Table, fmt_labels, fmt_ratio, format_age, parse_time
from skyshift.cli.state import CliState, pass_state
from skyshift.cli.tables import CLUSTER_HEADERS, build_table, cluster_resources, used
from skyshift.client import ALL_NAMESPACES
from skyshift.contract.lifecycles import JOB

HEADERS = CLUSTER_HEADERS  # the same columns as `skyctl get clusters`, used/total
MERGED_NAME = "Merged-Cluster"


def _add(into: dict[str, float], more: Mapping[str, float]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0.0) + v


def cluster_status_table(clusters: Sequence[Mapping[str, Any]]) -> tuple[Table, Table]:
    """The per-cluster table and the one-row merged table (Ready clusters only)."""
    table = Table(HEADERS, status_col=4)
    merged_avail: dict[str, float] = {}
    merged_total: dict[str, float] = {}
    oldest = None
    for c in clusters:
        meta = c.get("metadata") or {}
        avail, total = cluster_resources(c)
        phase = str((c.get("status") or {}).get("phase") or "Init")
        table.rows.append([
            str(meta.get("name", "-")),
            str((c.get("spec") or {}).get("manager", "-")),
            fmt_labels(meta.get("labels"), sep="\n"),
            fmt_ratio(used(avail, total), total),
            phase,
            format_age(meta.get("creationTimestamp")),
        ])
        if phase == "Ready":
            _add(merged_avail, avail)
            _add(merged_total, total)
        created = parse_time(meta.get("creationTimestamp"))
        if created and (oldest is None or created < oldest):
            oldest = created
    any_ready = any((c.get("status") or {}).get("phase") == "Ready" for c in clusters)
    merged = Table(HEADERS, status_col=4)
    merged.rows.append([
        MERGED_NAME, "skyshift", "<none>",
        fmt_ratio(used(merged_avail, merged_total), merged_total),
        "Ready" if any_ready else "Error",
        format_age(oldest.isoformat() if oldest else None),
    ])
    return table, merged


def active_jobs(jobs: Sequence[Mapping[str, Any]], limit: int) -> list[Mapping[str, Any]]:
    """Non-finished jobs, newest first."""
    active = [j for j in jobs if (j.get("status") or {}).get("phase") not in JOB.ended]
    active.sort(key=lambda j: str((j.get("metadata") or {}).get("creationTimestamp") or ""),
                reverse=True)
    return active[:limit]


@click.command("status")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True,
              help="Show at most this many active jobs.")
@pass_state
def status(state: CliState, limit: int) -> None:
    """Show clusters (used/total resources), their merged total, and the newest active jobs.

    \b
    Example:
      skyctl status
    """
    client = state.client()
    clusters = client.list("clusters")["items"]
    jobs = client.list("jobs", namespace=ALL_NAMESPACES)["items"]
    click.echo("Clusters")
    if clusters:
        table, merged = cluster_status_table(clusters)
        widths = print_table(table)
        click.echo("+\n" + "=" * max(sum(widths) + 3 * (len(widths) - 1), 20))
        print_table(merged)
    else:
        click.echo("  none attached: add one with `skyctl create cluster NAME --manager ...`")
    shown = active_jobs(jobs, limit)
    total_active = len(active_jobs(jobs, len(jobs) or 1))
    click.echo(f"\nActive jobs ({total_active})")
    if shown:
        print_table(build_table("Job", shown))
        if total_active > len(shown):
            click.echo(f"... and {total_active - len(shown)} more: skyctl get jobs -A")
    else:
        click.echo("  none")
