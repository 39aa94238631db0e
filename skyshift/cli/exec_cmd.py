"""``skyctl exec NAME -- CMD...``: run a command in a job's replica and relay its result.

The command's stdout and stderr go to ours and skyctl exits with its exit code, so ``exec`` works
in scripts. Replicas are chosen by rank (``--rank``) or, as in the original, by task name
(``--tasks``; replica names end in ``-<rank>``).
"""

from __future__ import annotations

import re

import click

from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import NAME
from skyshift.cli.output import note
from skyshift.cli.state import CliState, pass_state

_RANK_SUFFIX = re.compile(r"(?:^|-)(\d+)$")


def task_rank(task: str) -> int:
    """``3`` or ``train-1a2b3c4d-3`` -> 3."""
    m = _RANK_SUFFIX.search(task)
    if not m:
        raise UsageProblem(f"task {task!r}: expected a rank or a replica name ending in -<rank>")
    return int(m.group(1))


@click.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name", type=NAME)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the job.")
@click.option("--rank", "-r", type=click.IntRange(min=0), default=None,
              help="Replica to run in (default 0).")
@click.option("--tasks", "-t", multiple=True, metavar="TASK",
              help="Replica by rank or name (repeatable: runs in each).")
@click.option("--containers", multiple=True, hidden=True)
@click.option("--quiet", "-q", is_flag=True, help="Print only the command's output.")
@click.option("--tty", "-it", "-ti", is_flag=True, help="Interactive session (not supported).")
@click.pass_context
@pass_state
def exec_command(state: CliState, ctx: click.Context, name: str, command: tuple[str, ...],
                 namespace: str | None, rank: int | None, tasks: tuple[str, ...],
                 containers: tuple[str, ...], quiet: bool, tty: bool) -> None:
    """Run a command in a replica of a job (put the command after --).

    \b
    Examples:
      skyctl exec train -- nvidia-smi
      skyctl exec train --rank 2 -- sh -c 'ls /data | wc -l'
    """
    if tty:
        raise UsageProblem("interactive sessions (--tty) are not supported: pass a command")
    if containers and not quiet:
        note("note: --containers is ignored (each replica has one container)")
    ranks = [task_rank(t) for t in tasks] or [rank or 0]
    client = state.client()
    exit_code = 0
    for r in ranks:
        if len(ranks) > 1 and not quiet:
            note(f"--- {name} rank {r}")
        result = client.exec(name, list(command), state.namespace(namespace), rank=r)
        if result.stdout:
            click.echo(result.stdout, nl=not result.stdout.endswith("\n"))
        if result.stderr:
            click.echo(result.stderr, nl=not result.stderr.endswith("\n"), err=True)
        exit_code = result.exit_code or exit_code
    if exit_code:
        ctx.exit(exit_code)
