"""``skyctl``: the command group and the one place where every failure becomes a clear line.

No traceback ever reaches a user: API errors print ``error: ...`` (exit 1), usage mistakes keep
click's usage message (exit 2), Ctrl-C exits 130, and anything unexpected is reported in one line
(``SKYSHIFT_DEBUG=1`` shows the traceback for bug reports).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click
from pydantic import ValidationError

from skyshift.cli.apply import apply
from skyshift.cli.auth import COMMANDS as AUTH_COMMANDS
from skyshift.cli.config_cmd import config
from skyshift.cli.delete import delete
from skyshift.cli.describe import describe
from skyshift.cli.edit_cmd import edit
from skyshift.cli.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    describe_validation,
    one_line,
    tidy_lines,
    undecodable_argument,
)
from skyshift.cli.exec_cmd import exec_command
from skyshift.cli.get import get
from skyshift.cli.groups import CONTEXT_SETTINGS, AliasedGroup
from skyshift.cli.import_clusters import create  # create cluster [--all-contexts]
from skyshift.cli.logs import logs
from skyshift.cli.metadata_cmd import annotate, label
from skyshift.cli.patch_cmd import patch
from skyshift.cli.pipelines import COMMANDS as PIPELINE_COMMANDS  # also: create pipeline|schedule
from skyshift.cli.state import CliState
from skyshift.cli.status import status
from skyshift.cli.version import version
from skyshift.cli.wait_cmd import wait
from skyshift.client import ApiError
from skyshift.models import UnknownKind


class SkyctlGroup(AliasedGroup):
    """The root group: in standalone mode (the console script, click's CliRunner) every
    failure is reported by :func:`guarded`, so tests see exactly what users see."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if problem := undecodable_argument(sys.argv[1:] if args is None else args):
            if not standalone_mode:
                raise problem
            problem.show()
            sys.exit(problem.exit_code)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        sys.exit(guarded(lambda: super(SkyctlGroup, self).main(
            args, prog_name or "skyctl", complete_var, False, **extra
        )))


@click.group("skyctl", cls=SkyctlGroup, context_settings=CONTEXT_SETTINGS)
@click.option("--server", default=None, metavar="URL",
              help="API server (default: $SKYSHIFT_SERVER, else the current context's).")
@click.option("--context", "context_name", default=None, metavar="NAME",
              help="Use this context instead of the current one.")
@click.pass_context
def cli(ctx: click.Context, server: str | None, context_name: str | None) -> None:
    """skyctl: run jobs and services across many clusters as if they were one.

    \b
    Examples:
      skyctl create cluster local --manager local
      skyctl create job hello --run "echo hello" --restart_policy Never
      skyctl get jobs
      skyctl describe job hello
      skyctl wait job hello --for phase=Succeeded --timeout 120
      skyctl logs hello
      skyctl create pipeline train-1 -f train.yaml --param lr 0.01
      skyctl create schedule nightly --cron "0 2 * * *" -f train.yaml
    """
    state = ctx.ensure_object(CliState)
    state.server = server or state.server
    state.context = context_name or state.context


for command in (apply, create, get, describe, delete, logs, exec_command, status, config,
                version, wait, label, annotate, patch, edit):
    cli.add_command(command)
for command in (*PIPELINE_COMMANDS, *AUTH_COMMANDS):
    cli.add_command(command)


def _err(message: str) -> None:
    click.echo(f"error: {tidy_lines(message)}", err=True)


def guarded(body: Callable[[], Any]) -> int:
    """Run ``body`` (click in non-standalone mode) and turn every outcome into an exit code."""
    try:
        rv = body()
        return rv if isinstance(rv, int) else 0
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("", err=True)
        return EXIT_INTERRUPTED
    except ApiError as exc:
        _err(str(exc))
        return EXIT_ERROR
    except ValidationError as exc:
        _err(f"invalid object: {describe_validation(exc)}")
        return EXIT_USAGE
    except UnknownKind as exc:
        _err(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:
        # `skyctl get jobs | head`: the reader left; silence the flush at exit too.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # the last line of defence: one line, details on request
        if os.environ.get("SKYSHIFT_DEBUG"):
            traceback.print_exc()
        _err(one_line(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__)
        return EXIT_ERROR


def run(argv: list[str] | None = None, obj: CliState | None = None) -> int:
    """Run skyctl and return its exit code (for embedding; never raises)."""
    return guarded(
        lambda: cli.main(args=argv, prog_name="skyctl", standalone_mode=False, obj=obj)
    )


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="skyctl")


if __name__ == "__main__":
    main()
