"""``skyctl apply -f FILE``: make the server match manifests (create, or update if present).

Files may hold many YAML or JSON documents; ``-f -`` reads stdin and a directory means its
``*.yaml``/``*.yml``/``*.json`` files. Every document is validated locally first, so a typo
anywhere sends nothing; then each is applied, and one failure does not stop the others.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from skyshift.cli.errors import CliError, UsageProblem, describe_validation, one_line
from skyshift.cli.kinds import resolve_kind
from skyshift.cli.output import object_ref, print_data, to_yaml
from skyshift.cli.render import printable
from skyshift.cli.state import CliState, pass_state
from skyshift.client import ApiError
from skyshift.models import UnknownKind, load_manifests, parse_object

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def read_sources(files: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(label, text)`` for every file, directory entry or stdin named by ``-f``."""
    out: list[tuple[str, str]] = []
    for name in files:
        if name == "-":
            raw = getattr(sys.stdin, "buffer", None)
            out.append(("<stdin>", _text("<stdin>", raw.read()) if raw else sys.stdin.read()))
            continue
        path = Path(name).expanduser()
        try:
            if path.is_dir():
                for child in sorted(path.iterdir()):
                    if child.suffix in MANIFEST_SUFFIXES and child.is_file():
                        out.append((str(child), _text(str(child), child.read_bytes())))
            else:
                out.append((str(path), _text(str(path), path.read_bytes())))
        except OSError as exc:
            raise UsageProblem(f"cannot read {name}: {exc.strerror or exc}") from exc
    return out


def _text(label: str, data: bytes) -> str:
    """``data`` as UTF-8 text; a binary or otherwise undecodable file is named, with where."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageProblem(
            f"{printable(label)}: not a text manifest (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start} is not UTF-8); expected YAML or JSON"
        ) from None


def parse_documents(
    sources: list[tuple[str, str]], namespace: str | None
) -> list[tuple[str, dict[str, Any]]]:
    """Validated manifests with a label naming their file and document number."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for label, text in sources:
        try:
            manifests = load_manifests(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise UsageProblem(f"{label}: {one_line(str(exc))}") from exc
        for i, doc in enumerate(manifests, start=1):
            where = f"{label} (document {i})" if len(manifests) > 1 else label
            docs.append((where, check_document(where, doc, namespace)))
    return docs


def check_document(where: str, doc: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    if not doc.get("kind"):
        raise UsageProblem(f"{where}: not a manifest (no 'kind'); expected kind, metadata, spec")
    try:
        info = resolve_kind(str(doc.get("kind", "")))
    except UnknownKind as exc:
        raise UsageProblem(f"{where}: {exc}") from exc
    doc = dict(doc)
    doc["kind"] = info.kind
    for key in ("metadata", "spec"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise UsageProblem(f"{where}: {key} must be a mapping, got {type(doc[key]).__name__}")
    meta = dict(doc.get("metadata") or {})
    if info.namespaced and namespace and not meta.get("namespace"):
        meta["namespace"] = namespace
    doc["metadata"] = meta
    try:
        parse_object(doc)
    except ValidationError as exc:
        raise UsageProblem(f"{where}: invalid {info.kind}: {describe_validation(exc)}") from exc
    except ValueError as exc:
        raise UsageProblem(f"{where}: {one_line(str(exc))}") from exc
    return doc


@click.command("apply")
@click.option("--filename", "--file", "-f", "files", multiple=True, required=True,
              metavar="FILE", help="Manifest file, directory, or - for stdin (repeatable).")
@click.option("--namespace", "-n", default=None, metavar="NS",
              help="Namespace for manifests that name none.")
@click.option("--dry-run", is_flag=True, help="Validate and print, send nothing.")
@click.option("--output", "-o", type=click.Choice(["name", "json", "yaml"]), default=None,
              help="Print the applied objects in this format.")
@pass_state
def apply(state: CliState, files: tuple[str, ...], namespace: str | None, dry_run: bool,
          output: str | None) -> None:
    """Create or update objects from YAML/JSON manifests (several documents per file).

    \b
    Examples:
      skyctl apply -f job.yaml
      skyctl apply -f manifests/ -n dev
      cat cluster.yaml | skyctl apply -f -
    """
    docs = parse_documents(read_sources(files), namespace)
    if not docs:
        raise UsageProblem("no manifests found in " + ", ".join(files))
    if dry_run:
        for _, doc in docs:
            click.echo("---\n" + to_yaml(doc), nl=False)
        return
    client = state.client()
    failed = 0
    for where, doc in docs:
        try:
            result = client.apply(doc, namespace=state.namespace(namespace))
        except ApiError as exc:
            if exc.status == 0:
                raise
            failed += 1
            click.echo(f"error: {where}: {object_ref(doc['kind'], doc)}: {exc}", err=True)
            continue
        if output in ("json", "yaml"):
            print_data(result.object, output)
        else:
            click.echo(f"{object_ref(doc['kind'], result.object)} {result.action}")
    if failed:
        raise CliError(f"{failed} of {len(docs)} objects could not be applied")
