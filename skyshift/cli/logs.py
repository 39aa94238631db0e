"""``skyctl logs NAME [-f]``: a job's output, whichever cluster (Kubernetes, Slurm, local) runs it.

``-f`` follows: it prints what is new each time the output grows, and stops once the job has
ended (phase Succeeded or Failed), after printing the last of it; until a replica has started
(the API answers 404) there is nothing to print yet. A cluster that does not answer within the
API's bound (504) is busy, not gone: ``-f`` says so on stderr and reads again (after the job
ended, ``ENDED_RETRIES`` more times). The API has no streaming logs,
so between reads it waits on the job's watch (at most ``FOLLOW_INTERVAL`` seconds), which also
ends the wait at once when the job finishes.
"""

from __future__ import annotations

import contextlib

import click

from skyshift.cli.kinds import NAME
from skyshift.cli.state import CliState, pass_state
from skyshift.client import SkyShiftClient
from skyshift.client.errors import ApiError
from skyshift.contract.lifecycles import JOB

FOLLOW_INTERVAL = 2.0
ENDED_RETRIES = 3  # reads of an ended job's logs a busy cluster (504) may fail before -f stops


def _emit(text: str) -> None:
    if text:
        click.echo(text, nl=False)


def new_part(shown: str, text: str) -> str:
    """What of ``text`` has not been printed yet (all of it when the output was replaced,
    e.g. a restarted replica)."""
    return text[len(shown):] if text.startswith(shown) else text


def follow(client: SkyShiftClient, name: str, ns: str, tail: int | None,
           interval: float = FOLLOW_INTERVAL) -> None:
    """Print the job's output as it grows until the job has ended."""
    shown, first, busy_after_end = "", True, 0
    while True:
        job = client.get("jobs", name, ns)
        ended = str((job.get("status") or {}).get("phase") or "") in JOB.ended
        try:
            text = client.logs(name, ns)
        except ApiError as err:
            if err.status == 504 and busy_after_end < ENDED_RETRIES:  # a busy cluster: again
                click.echo(f"skyctl: {err} (reading again)", err=True)
                busy_after_end += ended
                continue
            if err.status != 404 or ended:  # 404: no replica placed or started yet
                raise
            text = shown
        if first and tail is not None:  # --tail N -f: the last N lines, then everything new
            _emit("".join(text.splitlines(keepends=True)[-tail:] if tail else []))
        else:
            _emit(new_part(shown, text))
        shown, first = text, False
        if ended:
            if shown and not shown.endswith("\n"):
                click.echo("")
            return
        rv = (job.get("metadata") or {}).get("resourceVersion")
        events = client.watch("jobs", name, ns, resource_version=rv, timeout=interval)
        with contextlib.closing(events):
            for _ in events:  # any change of the job: read again
                break


@click.command("logs")
@click.argument("name", type=NAME)
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the job.")
@click.option("--tail", type=click.IntRange(min=0), default=None, metavar="N",
              help="Only the last N lines.")
@click.option("--follow", "-f", "follow_output", is_flag=True,
              help="Keep printing new output until the job has ended.")
@pass_state
def logs(state: CliState, name: str, namespace: str | None, tail: int | None,
         follow_output: bool) -> None:
    """Print a job's logs.

    \b
    Examples:
      skyctl logs train
      skyctl logs train -n ml --tail 100
      skyctl logs train -f
    """
    ns = state.namespace(namespace)
    if follow_output:
        follow(state.client(), name, ns, tail)
        return
    text = state.client().logs(name, ns, tail=tail)
    click.echo(text, nl=not text.endswith("\n") and bool(text))
