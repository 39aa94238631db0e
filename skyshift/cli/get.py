"""``skyctl get KIND [NAME]``: tables, JSON/YAML, and ``--watch`` that prints rows as they change.

Watching starts from the resourceVersion of the list just printed, so no change between the
list and the watch is missed; if the server ends the stream the watch resumes from the last
event seen.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.output import (
    OUTPUT_FORMATS,
    note,
    object_ref,
    print_data,
    print_rows,
    print_table,
    to_yaml,
)
from skyshift.cli.render import Table, printable
from skyshift.cli.state import CliState, pass_state
from skyshift.cli.tables import build_table, rows
from skyshift.client import ALL_NAMESPACES, ApiError, SkyShiftClient
from skyshift.models import KindInfo

FC = TypeVar("FC", bound=Callable[..., Any])
WATCHED_EVENTS = ("ADDED", "MODIFIED", "DELETED")
RECONNECT_DELAY = 0.5


def output_option(default: str = "table") -> Callable[[FC], FC]:
    return click.option(
        "--output", "-o", "output", default=default, show_default=True,
        type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
        help="table, wide (more columns), json, yaml or name.",
    )


def list_scope(state: CliState, info: KindInfo, namespace: str | None, all_ns: bool) -> str | None:
    if not info.namespaced:
        return None
    return ALL_NAMESPACES if all_ns else state.namespace(namespace)


@click.command("get")
@click.argument("kind", type=KIND)
@click.argument("name", required=False, type=NAME)
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace to look in.")
@click.option("--all-namespaces", "-A", "all_ns", is_flag=True, help="List across namespaces.")
@click.option("--selector", "-l", default=None, metavar="K=V,...",
              help="Only objects with these labels (e.g. app=web,tier!=db).")
@output_option()
@click.option("--watch", "-w", is_flag=True, help="After listing, print changes as they happen.")
@click.option("--output-watch-events", "show_events", is_flag=True,
              help="With --watch: add an EVENT column (ADDED, MODIFIED, DELETED).")
@click.option("--watch-timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="With --watch: stop after this many seconds.")
@pass_state
def get(state: CliState, kind: KindInfo, name: str | None, namespace: str | None, all_ns: bool,
        selector: str | None, output: str, watch: bool, show_events: bool,
        watch_timeout: float | None) -> None:
    """Show objects of a kind (singular, plural or alias: job, jobs, svc, fp, edp, ns, cl).

    \b
    Examples:
      skyctl get clusters
      skyctl get jobs -A -o wide
      skyctl get job train -o yaml
      skyctl get jobs -l team=ml --watch
    """
    if name and all_ns:
        raise UsageProblem("a name and --all-namespaces cannot be used together")
    client = state.client()
    scope = list_scope(state, kind, namespace, all_ns)
    output = output.lower()
    if name:
        obj = client.get(kind.kind, name, scope)
        items, rv, data = [obj], _rv(obj), obj
    else:
        data = client.list(kind.kind, namespace=scope, label_selector=selector)
        items, rv = data["items"], _rv(data)
    show_events = show_events and watch
    table = Table([])
    widths: list[int] = []
    if output in ("table", "wide"):
        table = build_table(kind.kind, items, wide=output == "wide")
        if show_events:
            table.headers.insert(0, "EVENT")
            table.rows = [["ADDED", *r] for r in table.rows]
            table.status_col = None if table.status_col is None else table.status_col + 1
        if show_events:
            table.rows.insert(0, ["MODIFIED"] + [""] * (len(table.headers) - 1))
            widths = table.widths()  # room for the longest event name
            table.rows.pop(0)
            print_table(table, widths)
        elif items or watch:
            widths = print_table(table)
        else:
            where = "" if scope in (None, ALL_NAMESPACES) else f" in namespace {printable(scope)}"
            note(f"No {kind.plural} found{where}.")
    elif output == "name":
        for obj in items:
            click.echo(object_ref(kind.kind, obj))
    elif watch:
        for obj in items:
            _print_event(output, "ADDED", obj)
    else:
        print_data(data, output)
    if watch:
        watcher = Watcher(client, kind, name, scope, selector, output, show_events, table, widths)
        watcher.run(rv, watch_timeout)


def _rv(data: dict[str, Any]) -> str | None:
    rv = (data.get("metadata") or {}).get("resourceVersion")
    return None if rv is None else str(rv)


def _print_event(output: str, etype: str, obj: dict[str, Any]) -> None:
    if output == "json":
        click.echo(json.dumps({"type": etype, "object": obj}))
    else:
        click.echo("---\n" + to_yaml(obj), nl=False)


class Watcher:
    """Prints each watch event in the chosen format, reconnecting where the stream ended."""

    def __init__(self, client: SkyShiftClient, kind: KindInfo, name: str | None,
                 scope: str | None, selector: str | None, output: str, show_events: bool,
                 table: Table, widths: list[int]) -> None:
        self.client, self.kind, self.name, self.scope = client, kind, name, scope
        self.selector, self.output, self.show_events = selector, output, show_events
        self.table, self.widths = table, widths

    def run(self, rv: str | None, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            events = self.client.watch(self.kind.kind, self.name, self.scope, rv,
                                       label_selector=self.selector, timeout=remaining)
            try:
                for event in events:
                    rv = event.resource_version or rv
                    if event.type in WATCHED_EVENTS:
                        self.show(event.type, event.object)
                    if deadline is not None and time.monotonic() >= deadline:
                        return
            except ApiError as exc:
                if exc.status != 410 and exc.reason != "Expired":
                    raise
                rv = None  # history compacted: start over (current objects come as ADDED)
            time.sleep(RECONNECT_DELAY)  # the server ended the stream: resume from ``rv``

    def show(self, etype: str, obj: dict[str, Any]) -> None:
        if self.output in ("json", "yaml"):
            _print_event(self.output, etype, obj)
        elif self.output == "name":
            click.echo(object_ref(self.kind.kind, obj))
        else:
            new = rows(self.kind.kind, obj, wide=self.output == "wide")
            if self.show_events:
                new = [[etype, *r] for r in new]
            for row in new:
                for i, cell in enumerate(row):
                    longest = max(len(p) for p in cell.split("\n"))
                    if i < len(self.widths):
                        self.widths[i] = max(self.widths[i], longest)
            print_rows(self.table, new, self.widths)
        _flush()


def _flush() -> None:
    sys.stdout.flush()
