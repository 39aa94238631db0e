"""``skyctl patch KIND NAME -p '<json>' [--type merge|json]``: the API's PATCH, from the shell.

``merge`` is a JSON Merge Patch (RFC 7386: an object; ``null`` removes a field), ``json`` a JSON
Patch (RFC 6902: a list of operations). The server validates the result as it does a PUT.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import click

from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.state import CliState, pass_state
from skyshift.models import KindInfo


def parse_patch(text: str, kind: Literal["merge", "json"]) -> Any:
    """The patch document, or a usage error saying what shape ``--type`` expects."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageProblem(f"-p is not JSON: {exc.msg} at line {exc.lineno} column "
                           f"{exc.colno}") from None
    if kind == "merge" and not isinstance(doc, dict):
        raise UsageProblem("--type merge takes a JSON object, e.g. "
                           "-p '{\"spec\": {\"replicas\": 2}}'")
    if kind == "json" and not (isinstance(doc, list) and all(isinstance(o, dict) for o in doc)):
        raise UsageProblem('--type json takes a list of operations, e.g. -p \'[{"op": "replace", '
                           '"path": "/spec/replicas", "value": 2}]\'')
    return doc


@click.command("patch")
@click.argument("kind", type=KIND)
@click.argument("name", type=NAME)
@click.option("--patch", "-p", "text", required=True, metavar="JSON", help="The patch document.")
@click.option("--type", "patch_type", type=click.Choice(["merge", "json"]), default="merge",
              show_default=True, help="merge: JSON Merge Patch; json: JSON Patch operations.")
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the object.")
@pass_state
def patch(state: CliState, kind: KindInfo, name: str, text: str,
          patch_type: Literal["merge", "json"], namespace: str | None) -> None:
    """Change fields of an object with a merge patch or JSON Patch.

    \b
    Examples:
      skyctl patch job train -p '{"spec": {"priority": 5}}'
      skyctl patch job train --type json \\
        -p '[{"op": "replace", "path": "/spec/replicas", "value": 2}]'
    """
    doc = parse_patch(text, patch_type)
    ns = state.namespace(namespace) if kind.namespaced else None
    state.client().patch(kind.kind, name, ns, doc, type=patch_type)
    click.echo(f"{kind.kind.lower()}/{name} patched")
