"""CLI failures and how they reach the user: one ``error: ...`` line on stderr, never a traceback.

Exit codes: 1 for failures reported by the API (or while talking to it), 2 for usage mistakes
(bad flags, bad values, unknown kinds), 130 when interrupted.
"""

from __future__ import annotations

from typing import IO, Any

import click
from pydantic import ValidationError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(click.ClickException):
    """A failure shown as ``error: <message>`` (exit 1)."""

    exit_code = EXIT_ERROR

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", file=file, err=file is None)


class UsageProblem(CliError):
    """A bad value the user typed, found after click parsed it (exit 2, no usage dump)."""

    exit_code = EXIT_USAGE


def one_line(text: str) -> str:
    """Collapse whitespace so a message never spans lines."""
    return " ".join(str(text).split())


def describe_validation(exc: ValidationError) -> str:
    """The first pydantic error as ``spec.replicas: Input should be ...`` (+ how many more)."""
    errors = exc.errors(include_url=False)
    if not errors:
        return one_line(str(exc))
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if not str(p).startswith("function"))
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return one_line(f"{loc}: {msg}{more}" if loc else f"{msg}{more}")
