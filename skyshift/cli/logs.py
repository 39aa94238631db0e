"""``skyctl logs NAME``: a job's output, whichever cluster (Kubernetes, Slurm, local) runs it."""

from __future__ import annotations

import click

from skyshift.cli.kinds import NAME
from skyshift.cli.state import CliState, pass_state


@click.command("logs")
@click.argument("name", type=NAME)
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the job.")
@click.option("--tail", type=click.IntRange(min=0), default=None, metavar="N",
              help="Only the last N lines.")
@pass_state
def logs(state: CliState, name: str, namespace: str | None, tail: int | None) -> None:
    """Print a job's logs.

    \b
    Examples:
      skyctl logs train
      skyctl logs train -n ml --tail 100
    """
    text = state.client().logs(name, state.namespace(namespace), tail=tail)
    click.echo(text, nl=not text.endswith("\n") and bool(text))
