"""Pipelines and schedules: ``create pipeline|schedule``, ``cancel``, ``pause``, ``resume``,
``trigger`` and ``backfill``.

``create pipeline NAME -f FILE --param K V`` runs a Pipeline manifest again under a new name
with other parameter values (the file is a template; a parameter it does not declare is an
error). ``create schedule`` builds a Schedule from flags: when (``--cron``/``--every``) and what
(``--run`` for a one-command job, or ``-f`` with a Job or Pipeline manifest).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from skyshift.cli.apply import parse_documents, read_sources
from skyshift.cli.create import common, create, namespace_option, submit
from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import NAME
from skyshift.cli.manifests import job_manifest, validated
from skyshift.cli.object_args import object_command
from skyshift.cli.output import object_ref
from skyshift.cli.pairs import unique_pairs
from skyshift.cli.state import CliState, pass_state

PAIR = (str, str)
F = TypeVar("F", bound=Callable[..., Any])
OVERLAPS = ("Skip", "BufferOne", "BufferAll", "CancelOther", "AllowAll")


def one_manifest(path: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    docs = parse_documents(read_sources((path,)), None)
    if len(docs) != 1 or docs[0][1].get("kind") not in kinds:
        raise UsageProblem(f"{path}: expected one {' or '.join(kinds)} manifest")
    return docs[0][1]


def with_params(spec: dict[str, Any], params: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    declared = dict(spec.get("parameters") or {})
    for key, value in params:
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise UsageProblem(f"--param {key}: the pipeline declares no such parameter "
                               f"(declared: {known})")
        declared[key] = value
    return {**spec, "parameters": declared} if declared else spec


@create.aliased("pipeline", "pipelines", "pl")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--file", "-f", "path", required=True, metavar="FILE",
              help="A Pipeline manifest (its steps and parameters); '-' reads stdin.")
@click.option("--param", "-p", "params", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="Set a parameter the pipeline declares (repeatable).")
@click.option("--labels", "-l", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="Labels of the new pipeline (repeatable).")
@common
@pass_state
def create_pipeline(state: CliState, /, name: str, namespace: str | None, path: str,
                    params: tuple[tuple[str, str], ...], labels: tuple[tuple[str, str], ...],
                    dry_run: bool) -> None:
    """Run a pipeline from a manifest, under NAME, with parameters set.

    \b
    Examples:
      skyctl create pipeline train-0412 -f train.yaml --param lr 0.01
      skyctl get pipeline train-0412; skyctl describe pipeline train-0412
    """
    source = one_manifest(path, ("Pipeline",))
    meta = {"name": name, "namespace": state.namespace(namespace),
            "labels": {**(source.get("metadata") or {}).get("labels", {}), **dict(labels)}}
    spec = dict(source.get("spec") or {})
    spec.pop("cancel", None)
    manifest = {"kind": "Pipeline", "metadata": meta, "spec": with_params(spec, params)}
    submit(state, validated(manifest), dry_run)


@create.aliased("schedule", "schedules", "sched")
@click.argument("name", type=NAME)
@namespace_option
@click.option("--cron", default=None, metavar="EXPR",
              help="When, as 5 cron fields ('0 2 * * *') or @hourly, @daily...")
@click.option("--every", default=None, metavar="DURATION",
              help="When, as an interval: 10m, 2h, 1d (the server's floor is 60s unless its "
              "admin set SKYSHIFT_SCHEDULE_MIN_INTERVAL).")
@click.option("--timezone", default="UTC", show_default=True, help="IANA zone of --cron.")
@click.option("--overlap", type=click.Choice(OVERLAPS), default="Skip", show_default=True,
              help="A run due while the previous one still runs: skip it, queue one or all, "
              "cancel the previous one, or run both.")
@click.option("--history-limit", type=click.IntRange(1, 100), default=10, show_default=True,
              help="Finished runs to keep (older ones are deleted).")
@click.option("--max-active-runs", type=click.IntRange(1, 50), default=5, show_default=True,
              help="Unfinished runs at once; a run due beyond it is skipped.")
@click.option("--suspend", is_flag=True, help="Create it paused (`skyctl resume` starts it).")
@click.option("--run", default=None, help="What: one command, run as a one-replica job.")
@click.option("--image", default=None, help="With --run: container image.")
@click.option("--cpus", default="1", show_default=True, help="With --run: CPUs.")
@click.option("--file", "-f", "path", default=None, metavar="FILE",
              help="What: a Job or Pipeline manifest, run each time.")
@click.option("--param", "-p", "params", type=PAIR, multiple=True, metavar="KEY VALUE",
              callback=unique_pairs, help="With a pipeline -f: set a parameter (repeatable).")
@common
@pass_state
def create_schedule(state: CliState, /, name: str, namespace: str | None, cron: str | None,
                    every: str | None, timezone: str, overlap: str, history_limit: int,
                    max_active_runs: int, suspend: bool, run: str | None, image: str | None,
                    cpus: str,
                    path: str | None, params: tuple[tuple[str, str], ...],
                    dry_run: bool) -> None:
    """Create Jobs or Pipelines on a cron or an interval (a Temporal Schedule).

    \b
    Examples:
      skyctl create schedule nightly --cron "0 2 * * *" -f train-pipeline.yaml
      skyctl create schedule ping --every 5m --run "curl -fsS http://svc/health"
      skyctl get schedules; skyctl trigger schedule nightly
    """
    if (cron is None) == (every is None):
        raise UsageProblem("give exactly one of --cron and --every")
    if (run is None) == (path is None):
        raise UsageProblem("give exactly one of --run and -f (what each run creates)")
    ns = state.namespace(namespace)
    spec: dict[str, Any] = {
        "timezone": timezone, "overlapPolicy": overlap, "historyLimit": history_limit,
        "maxActiveRuns": max_active_runs, "suspend": suspend,
        **({"cron": cron} if cron else {"interval": every}),
    }
    if run is not None:
        job = job_manifest(name, namespace=ns, run=run, image=image, cpus=cpus,
                           restart="Never")
        spec["jobTemplate"] = {"spec": job["spec"]}
    else:
        assert path is not None
        source = one_manifest(path, ("Job", "Pipeline"))
        labels = (source.get("metadata") or {}).get("labels") or {}
        body = dict(source.get("spec") or {})
        if source["kind"] == "Pipeline":
            body.pop("cancel", None)
            spec["pipelineTemplate"] = {"metadata": {"labels": labels},
                                        "spec": with_params(body, params)}
        else:
            if params:
                raise UsageProblem("--param is for pipelines; a job has no parameters")
            spec["jobTemplate"] = {"metadata": {"labels": labels}, "spec": body}
    manifest = {"kind": "Schedule", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    submit(state, validated(manifest), dry_run)


def _kind_word(expected: str) -> Callable[[F], F]:
    return click.argument("kind", type=click.Choice([expected, f"{expected}s"]),
                          metavar=expected.upper())


def _verb(command: str, expected: str) -> Callable[[Callable[..., Any]], click.Command]:
    """``skyctl COMMAND KIND NAME [-n NS]`` where KIND can only be ``expected``."""
    return object_command(command, click.Choice([expected, f"{expected}s"]), expected.upper(),
                          "Namespace.")


@_verb("cancel", "pipeline")
def cancel(state: CliState, kind: str, name: str, namespace: str | None) -> None:
    """Cancel a pipeline: its running steps' jobs are deleted, the rest never start.

    \b
    Example:
      skyctl cancel pipeline train-0412
    """
    obj = state.client().patch("pipelines", name, state.namespace(namespace),
                               {"spec": {"cancel": True}})
    click.echo(f"{object_ref('Pipeline', obj)} cancelling")


def _suspend(state: CliState, name: str, namespace: str | None, value: bool) -> None:
    obj = state.client().patch("schedules", name, state.namespace(namespace),
                               {"spec": {"suspend": value}})
    click.echo(f"{object_ref('Schedule', obj)} {'paused' if value else 'resumed'}")


@_verb("pause", "schedule")
def pause(state: CliState, kind: str, name: str, namespace: str | None) -> None:
    """Pause a schedule (spec.suspend: true): no runs until `skyctl resume`."""
    _suspend(state, name, namespace, True)


@_verb("resume", "schedule")
def resume(state: CliState, kind: str, name: str, namespace: str | None) -> None:
    """Resume a paused schedule."""
    _suspend(state, name, namespace, False)


@_verb("trigger", "schedule")
def trigger(state: CliState, kind: str, name: str, namespace: str | None) -> None:
    """Run a schedule now (even while paused), under its overlap policy."""
    state.client().trigger_schedule(name, state.namespace(namespace))
    click.echo(f"schedule/{name} triggered")


def _when(value: str, option: str) -> str:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time: use ISO 8601, e.g. 2026-11-01T00:00:00Z", param_hint=option
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


@click.command("backfill")
@_kind_word("schedule")
@click.argument("name", type=NAME)
@click.option("--from", "start", required=True, metavar="TIME", help="ISO 8601 start (UTC "
              "unless it says otherwise).")
@click.option("--to", "end", required=True, metavar="TIME", help="ISO 8601 end (included).")
@click.option("--overlap", type=click.Choice(OVERLAPS), default="AllowAll", show_default=True,
              help="How the backfilled runs overlap each other (AllowAll runs at most the "
              "schedule's maxActiveRuns and skips the rest; BufferAll queues them).")
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace.")
@pass_state
def backfill(state: CliState, kind: str, name: str, start: str, end: str, overlap: str,
             namespace: str | None) -> None:
    """Run a schedule for every time it would have fired from --from to --to (both included).

    \b
    Example:
      skyctl backfill schedule nightly --from 2026-11-01 --to 2026-11-08
    """
    state.client().backfill_schedule(name, _when(start, "--from"), _when(end, "--to"),
                                     state.namespace(namespace), overlap)
    click.echo(f"schedule/{name} backfilling {start} .. {end}")


COMMANDS = (cancel, pause, resume, trigger, backfill)
