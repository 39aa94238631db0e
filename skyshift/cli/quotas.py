"""``skyctl create quota NAME --hard cpus=8,memory=32Gi,...`` and how quotas show in ``get``.

A Quota bounds what one namespace's admitted jobs hold over the whole super-cluster; the table
shows, per limit, ``used/hard`` as the control worker last wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import click

from skyshift.cli.create import common, create, namespace_option, submit
from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import NAME
from skyshift.cli.manifests import _meta, validated
from skyshift.cli.render import format_age
from skyshift.cli.state import CliState, pass_state
from skyshift.scheduler.quota import show

QUOTA_HEADERS = ["NAME", "NAMESPACE", "USED/HARD", "AGE"]


def parse_hard(text: str) -> dict[str, str]:
    """``cpus=8,memory=32Gi,accelerator/A100=4`` -> a mapping; a key given twice is refused."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise UsageProblem(f"--hard: expected KEY=VALUE, got {part[:60]!r}")
        if key.strip() in out:
            raise UsageProblem(f"--hard: {key.strip()!r} is given twice")
        out[key.strip()] = value.strip()
    if not out:
        raise UsageProblem("--hard: give at least one limit, e.g. cpus=8,memory=32Gi,jobs=100")
    return out


def quota_manifest(name: str, *, namespace: str, hard: Mapping[str, str]) -> dict[str, Any]:
    return validated(
        {"kind": "Quota", "metadata": _meta(name, namespace), "spec": {"hard": dict(hard)}}
    )


@create.aliased("quota", "quotas", "quo")
@click.argument("name", type=NAME)
@namespace_option
@click.option(
    "--hard",
    required=True,
    metavar="KEY=VALUE,...",
    help="Limits: cpus, memory (MB or 32Gi), gpus, jobs, replicas, "
    "accelerator/<TYPE> (comma separated).",
)
@common
@pass_state
def create_quota(
    state: CliState, /, name: str, namespace: str | None, hard: str, dry_run: bool
) -> None:
    """Bound what a namespace's admitted jobs may hold over the whole super-cluster.

    A job that would go over waits Pending with the quota and what is short in its reason, and
    is admitted when room frees (a job ends, the quota is raised).

    \b
    Example:
      skyctl create quota team-a -n ml --hard cpus=8,memory=32Gi,gpus=2,jobs=100
      skyctl get quotas -n ml
    """
    manifest = quota_manifest(name, namespace=state.namespace(namespace), hard=parse_hard(hard))
    submit(state, manifest, dry_run)


def used_over_hard(obj: Mapping[str, Any]) -> str:
    hard = (obj.get("spec") or {}).get("hard") or {}
    used = (obj.get("status") or {}).get("used") or {}
    parts = [
        f"{k}: {show(k, float(used.get(k, 0)))}/{show(k, float(v))}"
        for k, v in sorted(hard.items())
    ]
    return ", ".join(parts) or "-"


def quota_rows(obj: Mapping[str, Any], wide: bool, now: datetime | None) -> list[list[str]]:
    meta = obj.get("metadata") or {}
    return [
        [
            str(meta.get("name", "-")),
            str(meta.get("namespace", "-")),
            used_over_hard(obj),
            format_age(meta.get("creationTimestamp"), now),
        ]
    ]
