"""``skyctl edit KIND NAME``: the object's YAML in ``$EDITOR``, written back only if unchanged
meanwhile.

The PUT carries the resourceVersion that was read, so an edit never overwrites someone else's
change (compare-and-swap): a conflict, an invalid result or YAML that does not parse is
reported, and the edited text is kept in a file named in the message so nothing typed is lost.
Saving the text unchanged (or emptying it) cancels the edit.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import click
import yaml

from skyshift.cli.errors import CliError, one_line
from skyshift.cli.object_args import object_command
from skyshift.cli.output import to_yaml
from skyshift.cli.state import CliState
from skyshift.client import ApiError
from skyshift.models import KindInfo

HEADER = (
    "# Edit the object below and save to apply it; save it unchanged (or empty) to cancel.\n"
    "# status is shown for reference: it is the system's, and edits to it are ignored.\n"
)


def keep(text: str, ref: str) -> str:
    """Save ``text`` (what the user typed) to a file of its own and return its path."""
    fd, path = tempfile.mkstemp(prefix=f"skyctl-edit-{ref.replace('/', '-')}-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def parse_edit(text: str, ref: str) -> dict[str, Any] | None:
    """The edited object; None for an empty buffer (cancel); CliError for bad YAML."""
    body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        raise CliError(f"{ref}: the edited text is not valid YAML ({one_line(str(exc))}); "
                       f"your edit is saved in {keep(text, ref)}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise CliError(f"{ref}: the edited text must be one mapping (kind, metadata, spec); "
                       f"your edit is saved in {keep(text, ref)}")
    return data


def check_identity(original: dict[str, Any], edited: dict[str, Any], ref: str,
                   text: str) -> None:
    """An edit may not turn the object into another one (kind, name, namespace)."""
    meta, new_meta = original.get("metadata") or {}, edited.get("metadata") or {}
    for what, before, after in (("kind", original.get("kind"), edited.get("kind")),
                                *((f"metadata.{k}", meta.get(k), new_meta.get(k))
                                  for k in ("name", "namespace"))):
        if before != after:
            raise CliError(f"{ref}: {what} cannot be changed by an edit ({before!r} -> "
                           f"{after!r}); your edit is saved in {keep(text, ref)}")


@object_command("edit")
def edit(state: CliState, kind: KindInfo, name: str, namespace: str | None) -> None:
    """Edit an object in $EDITOR (else $VISUAL, else vi) and apply it.

    \b
    Examples:
      skyctl edit job train
      EDITOR=nano skyctl edit cluster kind-1
    """
    client = state.client()
    ns = state.namespace(namespace) if kind.namespaced else None
    ref = f"{kind.kind.lower()}/{name}"
    original = client.get(kind.kind, name, ns)
    before = HEADER + to_yaml(original)
    text = click.edit(before, extension=".yaml", require_save=False)
    edited = None if text is None or text == before else parse_edit(text, ref)
    if edited is None or edited == original:
        click.echo("edit cancelled, no changes made.")
        return
    assert text is not None
    check_identity(original, edited, ref, text)
    rv = (original.get("metadata") or {}).get("resourceVersion")
    edited.setdefault("metadata", {})["resourceVersion"] = rv  # compare-and-swap on what was read
    try:
        client.update(edited, ns)
    except ApiError as exc:
        saved = keep(text, ref)
        if exc.status == 409:
            raise CliError(f"{ref} was changed by someone else since it was opened "
                           f"(resourceVersion {rv}); nothing was written. Your edit is saved in "
                           f"{saved}: run `skyctl edit` again, or `skyctl apply -f {saved}` "
                           "after checking it") from None
        raise CliError(f"{ref}: {exc}\nnothing was written; your edit is saved in {saved}") \
            from None
    click.echo(f"{ref} edited")
