"""``skyctl create cluster --manager k8 --config KUBECONFIG --all-contexts``: attach every context.

A kubeconfig often names several clusters (one context each); attaching them one
``skyctl create cluster NAME --context CTX`` at a time is tedious. ``--all-contexts`` creates one
Cluster per context of the file (the current context first), named after the context (made a
DNS-1123 label: ``kind-dev_1`` -> ``kind-dev-1``), or ``NAME-<context>`` when a NAME is given.
Labels (``-l``) go on every one of them. Existing clusters are reported and skipped, so a second
run attaches only the contexts added since.

Each manifest carries the kubeconfig path (made absolute: the skylet runs elsewhere) and the
context twice: in ``spec.config`` (``kubeconfig``, ``context``), which is what the ``k8`` adapter
reads, and in the seed's ``spec.config_path`` / ``spec.context`` fields, which ``describe``
shows. The kubeconfig is read as plain YAML here (no Kubernetes client in the CLI).

This module wraps the ``create cluster`` command of :mod:`skyshift.cli.create` (NAME becomes
optional, one flag is added) and re-exports the ``create`` group, which is how the root group
picks it up (one import in :mod:`skyshift.cli.main`).
"""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

import click
import yaml

from skyshift.cli import manifests
from skyshift.cli.create import create
from skyshift.cli.errors import CliError, UsageProblem
from skyshift.cli.output import note, object_ref, to_yaml
from skyshift.cli.state import CliState
from skyshift.client import ApiError
from skyshift.models import managers
from skyshift.models.cluster import DEFAULT_MANAGER

__all__ = ["cluster_name", "create", "kubeconfig_contexts"]

_ORIGINAL = create.commands["cluster"]
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


def kubeconfig_contexts(path: Path) -> list[str]:
    """Context names of a kubeconfig, the current context first, then by name."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise UsageProblem(f"cannot read kubeconfig {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageProblem(f"kubeconfig {path} is not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise UsageProblem(f"kubeconfig {path} is not a kubeconfig (no mapping at the top)")
    names = [str(c["name"]) for c in doc.get("contexts") or []
             if isinstance(c, dict) and c.get("name")]
    current = doc.get("current-context")
    return sorted(dict.fromkeys(names), key=lambda n: (n != current, n))


def cluster_name(context: str, prefix: str | None = None) -> str:
    """A DNS-1123 label for a context (``prefix-`` in front when given), at most 63 chars."""
    base = _NOT_LABEL.sub("-", context.lower()).strip("-") or "cluster"
    name = f"{prefix}-{base}" if prefix else base
    return name[:63].rstrip("-")


def context_manifest(name: str, kubeconfig: Path, context: str,
                     flags: dict[str, Any]) -> dict[str, Any]:
    flags = {**flags, "manager": "k8", "config_path": str(kubeconfig), "kube_context": context}
    manifest = manifests.cluster_manifest(name, **flags)
    manifest["spec"]["config"] = {"kubeconfig": str(kubeconfig), "context": context}
    return manifests.validated(manifest)


def context_by_name(name: str, flags: dict[str, Any]) -> dict[str, Any]:
    """``create cluster NAME --manager k8 --config KUBECONFIG`` without ``--context``: the
    context named NAME, as in the original SkyShift (issue 31: taking the current context
    attached one cluster under two names). Several contexts and none named NAME is refused
    here, listing them; a kubeconfig this machine cannot read is left to the skylet, whose
    adapter applies the same rule (``compat.kubernetes.api.resolve_context``)."""
    if (_manager(flags) != "k8"
            or flags.get("provision") or flags.get("kube_context")
            or not flags.get("config_path")):
        return flags
    path = Path(str(flags["config_path"])).expanduser()
    try:
        contexts = kubeconfig_contexts(path) if path.is_file() else []
    except UsageProblem:
        return flags
    if name in contexts:
        return {**flags, "kube_context": name}
    if len(contexts) > 1:
        raise UsageProblem(
            f"kubeconfig {path} has {len(contexts)} contexts ({', '.join(contexts)}) and none "
            f"is named {name}: say which one with --context (or --all-contexts for all)")
    return flags


def _manager(flags: dict[str, Any]) -> str:
    return managers.resolve(flags.get("manager") or DEFAULT_MANAGER)


def import_all(state: CliState, prefix: str | None, dry_run: bool, flags: dict[str, Any]) -> None:
    if _manager(flags) != "k8":
        raise UsageProblem("--all-contexts attaches Kubernetes clusters: use --manager k8")
    if flags.get("provision"):
        raise UsageProblem("--all-contexts attaches existing clusters: drop --provision")
    if flags.pop("wait", False):
        raise UsageProblem("--wait follows one cluster: drop --all-contexts or --wait")
    flags.pop("timeout", None)
    if flags.get("kube_context"):
        raise UsageProblem("--all-contexts and --context exclude each other")
    if not flags.get("config_path"):
        raise UsageProblem("--all-contexts needs the kubeconfig: --config PATH")
    path = Path(str(flags["config_path"])).expanduser().resolve()
    contexts = kubeconfig_contexts(path)
    if not contexts:
        raise UsageProblem(f"kubeconfig {path} has no contexts")
    docs = [context_manifest(cluster_name(c, prefix), path, c, flags) for c in contexts]
    taken = [d["metadata"]["name"] for d in docs]
    if len(set(taken)) != len(taken):
        raise UsageProblem(f"contexts of {path} map onto the same cluster names: {taken}")
    if dry_run:
        click.echo("---\n".join(to_yaml(d) for d in docs), nl=False)
        return
    client = state.client()
    failed: list[str] = []
    for context, doc in zip(contexts, docs, strict=True):
        ref = object_ref("Cluster", doc)
        try:
            client.create(doc)
        except ApiError as exc:
            if exc.status == 409:
                note(f"{ref} exists: skipped (context {context})")
                continue
            failed.append(f"{ref}: {exc}")
            note(f"error: {ref}: {exc}")
            continue
        click.echo(f"{ref} created (context {context})")
    if failed:
        raise CliError(f"{len(failed)} of {len(docs)} clusters not created: {failed[0]}")


def _wrap(original: click.Command) -> click.Command:
    params: list[click.Parameter] = []
    for param in original.params:
        if isinstance(param, click.Argument) and param.name == "name":
            param = copy.copy(param)
            param.required = False
        params.append(param)
    params.append(click.Option(
        ["--all-contexts", "all_contexts"], is_flag=True,
        help="With --manager k8 --config KUBECONFIG: attach every context of the file, each "
             "as a cluster named after its context (NAME, if given, is a prefix).",
    ))
    callback = original.callback
    assert callback is not None

    @click.pass_context
    def run(ctx: click.Context, /, name: str | None, all_contexts: bool, **flags: Any) -> Any:
        if all_contexts:
            state = ctx.ensure_object(CliState)
            return import_all(state, name, bool(flags.pop("dry_run", False)), flags)
        if not name:
            raise click.UsageError("Missing argument 'NAME' (or pass --all-contexts).", ctx)
        return ctx.invoke(callback, name=name, **context_by_name(name, flags))

    help_text = inspect.cleandoc(original.help or "").rstrip() + (
        "\n\n\b\nEvery context of a kubeconfig at once:\n"
        "  skyctl create cluster --manager k8 --config ~/.kube/config --all-contexts"
    )
    return click.Command(
        original.name, params=params, callback=run, help=help_text,
        short_help=original.short_help, context_settings=original.context_settings,
        epilog=original.epilog, options_metavar=original.options_metavar,
    )


if not getattr(_ORIGINAL, "_skyshift_all_contexts", False):
    _wrapped = _wrap(_ORIGINAL)
    _wrapped._skyshift_all_contexts = True  # type: ignore[attr-defined]
    create.commands["cluster"] = _wrapped
