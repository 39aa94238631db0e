"""``skyctl label`` and ``skyctl annotate``: kubectl's ``KEY=VALUE`` to set, ``KEY-`` to remove.

A key that already holds another value is refused unless ``--overwrite`` is given (as kubectl
does), so a typo cannot silently replace a label a FilterPolicy or a selector relies on. The
change is one merge patch conditional on the resourceVersion that was read, so a concurrent
writer is never overwritten: a conflict is retried from a fresh read a few times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from skyshift.cli.errors import CliError, UsageProblem
from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.render import printable
from skyshift.cli.state import CliState, pass_state
from skyshift.client import ApiError, SkyShiftClient
from skyshift.models import KindInfo

CONFLICT_RETRIES = 3


def parse_changes(args: Sequence[str], what: str) -> dict[str, str | None]:
    """``k=v`` -> set, ``k-`` -> remove (None); a key named twice or a bare word is refused."""
    out: dict[str, str | None] = {}
    for arg in args:
        if "=" in arg:
            key, value = arg.split("=", 1)
        elif arg.endswith("-") and len(arg) > 1:
            key, value = arg[:-1], None
        else:
            raise UsageProblem(f"{what} {printable(arg)!r}: expected KEY=VALUE to set or KEY- "
                               "to remove")
        if not key:
            raise UsageProblem(f"{what} {printable(arg)!r} has an empty key")
        if key in out:
            raise UsageProblem(f"{what} key {printable(key)!r} is given more than once")
        out[key] = value
    return out


def plan(current: dict[str, Any], changes: dict[str, str | None], overwrite: bool,
         what: str) -> tuple[dict[str, str | None], list[str]]:
    """The merge patch of ``changes`` on ``current`` and notes for keys already as asked."""
    patch: dict[str, str | None] = {}
    notes = []
    for key, value in changes.items():
        have = current.get(key)
        if value is None:
            if key in current:
                patch[key] = None
            else:
                notes.append(f"{what} {printable(key)!r} not found")
        elif have is None or have == value:
            if have != value:
                patch[key] = value
        elif not overwrite:
            raise CliError(f"{what} {printable(key)!r} already has a value "
                           f"({printable(str(have))}), and --overwrite is false")
        else:
            patch[key] = value
    return patch, notes


def change_metadata(client: SkyShiftClient, kind: KindInfo, name: str, ns: str | None,
                    field: str, changes: dict[str, str | None], overwrite: bool) -> str:
    """Apply ``changes`` to ``metadata.<field>``; returns ``labeled``/``not labeled``-style
    outcome words."""
    what = field[:-1]  # labels -> label
    for _ in range(CONFLICT_RETRIES):
        obj = client.get(kind.kind, name, ns)
        meta = obj.get("metadata") or {}
        patch, notes = plan(dict(meta.get(field) or {}), changes, overwrite, what)
        for line in notes:
            click.echo(f"warning: {line}", err=True)
        if not patch:
            return "unchanged"
        body = {"metadata": {field: patch, "resourceVersion": meta.get("resourceVersion")}}
        try:
            client.patch(kind.kind, name, ns, body, type="merge")
        except ApiError as exc:
            if exc.status == 409:
                continue
            raise
        return "labeled" if field == "labels" else "annotated"
    raise CliError(f"{kind.kind.lower()}/{name} kept changing; try again")


def _metadata_command(field: str, example: str) -> click.Command:
    what = field[:-1]

    @click.command(what if what != "annotation" else "annotate",
                   help=f"Set (KEY=VALUE) or remove (KEY-) {field} of an object.\n\n"
                   f"A key that has another value is refused unless --overwrite.\n\n\b\nExamples:\n"
                   f"{example}")
    @click.argument("kind", type=KIND)
    @click.argument("name", type=NAME)
    @click.argument("changes", nargs=-1, required=True, metavar="KEY=VALUE|KEY-...")
    @click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the object.")
    @click.option("--overwrite", is_flag=True, help="Replace values that are already set.")
    @pass_state
    def command(state: CliState, kind: KindInfo, name: str, changes: tuple[str, ...],
                namespace: str | None, overwrite: bool) -> None:
        wanted = parse_changes(changes, what)
        ns = state.namespace(namespace) if kind.namespaced else None
        outcome = change_metadata(state.client(), kind, name, ns, field, wanted, overwrite)
        click.echo(f"{kind.kind.lower()}/{name} {outcome}")

    return command


label = _metadata_command("labels", "  skyctl label cluster kind-1 gpu=a100\n"
                          "  skyctl label job train team=ml --overwrite\n"
                          "  skyctl label cluster kind-1 gpu-")
annotate = _metadata_command("annotations", "  skyctl annotate job train owner=alice\n"
                             "  skyctl annotate job train owner-")
