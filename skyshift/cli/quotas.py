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

QUOTA_HEADERS = ["NAME", "NAMESPACE", "COHORT", "USED/HARD", "AGE"]
QUOTA_WIDE = ["WEIGHT", "BORROWED"]


def parse_hard(text: str, flag: str = "--hard") -> dict[str, str]:
    """``cpus=8,memory=32Gi,accelerator/A100=4`` -> a mapping; a key given twice is refused."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise UsageProblem(f"{flag}: expected KEY=VALUE, got {part[:60]!r}")
        if key.strip() in out:
            raise UsageProblem(f"{flag}: {key.strip()!r} is given twice")
        out[key.strip()] = value.strip()
    if not out:
        raise UsageProblem(f"{flag}: give at least one limit, e.g. cpus=8,memory=32Gi,jobs=100")
    return out


def quota_manifest(name: str, *, namespace: str, hard: Mapping[str, str], cohort: str = "",
                   weight: float = 1.0, borrowing_limit: Mapping[str, str] | None = None,
                   ) -> dict[str, Any]:
    spec: dict[str, Any] = {"hard": dict(hard)}
    if cohort:
        spec["cohort"] = cohort
    if weight != 1.0:
        spec["weight"] = weight
    if borrowing_limit:
        spec["borrowingLimit"] = dict(borrowing_limit)
    return validated({"kind": "Quota", "metadata": _meta(name, namespace), "spec": spec})


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
@click.option("--cohort", default="", metavar="NAME",
              help="Lend and borrow unused quota among the quotas naming this cohort.")
@click.option("--weight", default=1.0, type=float, show_default=True,
              help="Weight in fair sharing within the cohort.")
@click.option("--borrowing-limit", "borrowing_limit", default="", metavar="KEY=VALUE,...",
              help="At most this much over --hard may be borrowed (default: no bound).")
@common
@pass_state
def create_quota(state: CliState, /, name: str, namespace: str | None, hard: str, cohort: str,
                 weight: float, borrowing_limit: str, dry_run: bool) -> None:
    """Bound what a namespace's admitted jobs may hold over the whole super-cluster.

    A job that would go over waits Pending with the quota and what is short in its reason, and
    is admitted when room frees (a job ends, the quota is raised).

    \b
    Quotas naming the same --cohort lend each other what they leave unused; among jobs of
    equal priority, the namespace furthest below its weighted share is admitted first.

    \b
    Examples:
      skyctl create quota team-a -n ml --hard cpus=8,memory=32Gi,gpus=2,jobs=100
      skyctl create quota team-b -n web --hard cpus=8 --cohort shared --weight 2
      skyctl get quotas -A -o wide
    """
    limits = parse_hard(borrowing_limit, "--borrowing-limit") if borrowing_limit else None
    manifest = quota_manifest(name, namespace=state.namespace(namespace), hard=parse_hard(hard),
                              cohort=cohort, weight=weight, borrowing_limit=limits)
    submit(state, manifest, dry_run)


def used_over_hard(obj: Mapping[str, Any]) -> str:
    hard = (obj.get("spec") or {}).get("hard") or {}
    used = (obj.get("status") or {}).get("used") or {}
    parts = [
        f"{k}: {show(k, float(used.get(k, 0)))}/{show(k, float(v))}"
        for k, v in sorted(hard.items())
    ]
    return ", ".join(parts) or "-"


def amounts(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}: {show(k, float(v))}" for k, v in sorted(values.items())) or "-"


def quota_rows(obj: Mapping[str, Any], wide: bool, now: datetime | None) -> list[list[str]]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    row = [str(meta.get("name", "-")), str(meta.get("namespace", "-")),
           str(spec.get("cohort") or "-"), used_over_hard(obj),
           format_age(meta.get("creationTimestamp"), now)]
    if wide:
        row += [f"{float(spec.get('weight', 1.0)):g}",
                amounts((obj.get("status") or {}).get("borrowed") or {})]
    return [row]
