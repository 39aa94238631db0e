"""The words a command about one stored object starts with: ``skyctl VERB KIND NAME [-n NS]``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.state import pass_state


def object_command(
    command: str,
    kind: click.ParamType[Any] = KIND,
    metavar: str | None = None,
    namespace_help: str = "Namespace of the object.",
) -> Callable[[Callable[..., Any]], click.Command]:
    """A click command taking KIND, NAME and --namespace, its function called with the CLI state
    first (``fn(state, kind, name, namespace)``)."""

    def wrap(fn: Callable[..., Any]) -> click.Command:
        fn = pass_state(fn)
        fn = click.option("--namespace", "-n", default=None, metavar="NS", help=namespace_help)(fn)
        fn = click.argument("name", type=NAME)(fn)
        fn = click.argument("kind", type=kind, metavar=metavar)(fn)
        return click.command(command)(fn)

    return wrap
