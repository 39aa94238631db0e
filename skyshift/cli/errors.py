"""CLI failures and how they reach the user: ``error: ...`` on stderr, never a traceback.

A failure is one line, except an invalid object with several problems: then every problem gets
a line of its own with its field path, so one run shows everything there is to fix.

Exit codes: 1 for failures reported by the API (or while talking to it), 2 for usage mistakes
(bad flags, bad values, unknown kinds), 130 when interrupted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import IO, Any

import click
from pydantic import ValidationError

from skyshift.cli.render import printable

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(click.ClickException):
    """A failure shown as ``error: <message>`` (exit 1)."""

    exit_code = EXIT_ERROR

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {tidy_lines(self.format_message())}", file=file, err=file is None)


class UsageProblem(CliError):
    """A bad value the user typed, found after click parsed it (exit 2, no usage dump)."""

    exit_code = EXIT_USAGE


_ESCAPED = re.compile("[\ud800-\udfff]")


def undecodable_argument(args: Sequence[str]) -> UsageProblem | None:
    """The error for the first command-line argument that is not UTF-8 text, or None.

    Python hands such bytes over as lone surrogates (``surrogateescape``), which no request body
    can carry; so they are refused once, here, for every option and argument, naming the option
    they were given to."""
    for index, arg in enumerate(args):
        match = _ESCAPED.search(arg)
        if match is None:
            continue
        point = ord(match.group())
        what = f"byte 0x{point - 0xDC00:02x}" if 0xDC80 <= point <= 0xDCFF else f"U+{point:04X}"
        before = args[index - 1] if index else ""
        if arg.startswith("--") and "=" in arg:
            where = arg.split("=", 1)[0]
        elif before.startswith("-") and before != "--" and not _ESCAPED.search(before):
            where = before
        else:
            where = f"argument {arg!r}"
        return UsageProblem(f"{where}: the value is not valid UTF-8 text ({what})")
    return None


def one_line(text: str) -> str:
    """Collapse whitespace so a message never spans lines."""
    return " ".join(str(text).split())


def tidy_lines(text: str) -> str:
    """Collapse whitespace inside each line, keeping line breaks and a two-space indent."""
    out = []
    for line in str(text).splitlines() or [""]:
        if line.strip():
            indent = "  " if line.startswith((" ", "\t")) else ""
            out.append(indent + printable(one_line(line)))
    return "\n".join(out)


def field_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """Pydantic's ``("spec", "ports", 0)`` -> ``spec.ports[0]``; validator names are dropped."""
    out = ""
    for part in loc:
        text = str(part)
        if text.startswith("function-"):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif text == "[key]":
            out += " (name)"
        else:
            out = f"{out}.{text}" if out else text
    return out


def problems(errors: list[tuple[str, str]]) -> str:
    """``field: message`` for one problem; a count, then one indented line each, for more."""
    lines = [f"{field}: {msg}" if field else msg for field, msg in errors]
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:\n" + "\n".join(f"  {one_line(line)}" for line in lines)


def describe_validation(exc: ValidationError) -> str:
    """Every pydantic error with its field path (``spec.replicas: Input should be ...``)."""
    errors = exc.errors(include_url=False)
    if not errors:
        return one_line(str(exc))
    return problems([
        (field_path(e.get("loc", ())),
         one_line(str(e.get("msg", "invalid value")).removeprefix("Value error, ")))
        for e in errors
    ])
