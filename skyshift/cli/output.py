"""Writing results: tables (with coloured STATUS on terminals), JSON, YAML and names.

rich decides whether colour is wanted (a terminal, ``NO_COLOR`` unset); in pipes and tests
the output is plain text. Machine formats are written with ``click.echo``, untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import click
import yaml
from rich.console import Console
from rich.text import Text

from skyshift.cli.render import GAP, Table, row_lines

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "name")

STATUS_STYLES = {
    "Ready": "green",
    "Running": "green",
    "Active": "green",
    "Succeeded": "cyan",
    "Failed": "red",
    "Error": "red",
    "Deleting": "magenta",
    "Terminating": "magenta",
    "Provisioning": "yellow",
    "Scaling": "yellow",
}


def _console(err: bool = False) -> Console:
    return Console(highlight=False, soft_wrap=True, stderr=err, markup=False, emoji=False)


def _styled(line: str, offset: int | None, status: str) -> Text:
    text = Text(line)
    if offset is not None and status and line[offset : offset + len(status)] == status:
        text.stylize(STATUS_STYLES.get(status, "yellow"), offset, offset + len(status))
    return text


def print_rows(table: Table, rows: Sequence[Sequence[str]], widths: Sequence[int]) -> None:
    """Print rows (no header) in the given column widths, colouring the STATUS cell."""
    console = _console()
    col = table.status_col
    offset = None if col is None else sum(widths[:col]) + GAP * col
    for row in rows:
        status = row[col] if col is not None and col < len(row) else ""
        for i, line in enumerate(row_lines(row, widths)):
            console.print(_styled(line, offset if i == 0 else None, status))


def print_table(table: Table, widths: Sequence[int] | None = None) -> list[int]:
    """Print a table with its header; returns the widths (watch mode keeps using them)."""
    widths = list(widths) if widths is not None else table.widths()
    _console().print(Text(table.header_line(widths)))
    print_rows(table, table.rows, widths)
    return widths


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str)


def to_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def print_data(data: Any, fmt: str) -> None:
    """JSON or YAML of one object or a list object."""
    if fmt == "json":
        click.echo(to_json(data))
    else:
        click.echo(to_yaml(data), nl=False)


def object_ref(kind: str, obj: Mapping[str, Any]) -> str:
    """``job/train`` (what ``-o name`` and the create/delete messages print)."""
    return f"{kind.lower()}/{(obj.get('metadata') or {}).get('name', '?')}"


def note(message: str) -> None:
    """Informational text for humans on stderr (keeps stdout clean for -o json)."""
    click.echo(message, err=True)
