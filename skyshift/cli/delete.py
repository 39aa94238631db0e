"""``skyctl delete KIND NAME...``: says whether the object is gone or still being torn down.

Kinds with a lifecycle (jobs, clusters, services) answer 202: their workflow first removes what
they run on the clusters, so the CLI prints ``deleting`` rather than pretending it is done. A
second delete of an object still being torn down says so (and since when) instead of another
bare ``deleting``.
"""

from __future__ import annotations

import time

import click

from skyshift.cli.errors import CliError
from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.output import object_ref
from skyshift.cli.state import CliState, pass_state
from skyshift.client import ApiError, SkyShiftClient
from skyshift.models import KindInfo


@click.command("delete")
@click.argument("kind", type=KIND)
@click.argument("names", nargs=-1, required=True, metavar="NAME...", type=NAME)
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the objects.")
@click.option("--wait", is_flag=True, help="Wait until objects being torn down are gone.")
@click.option("--timeout", type=click.FloatRange(min=0), default=300, show_default=True,
              metavar="SECONDS", help="With --wait: give up after this long.")
@pass_state
def delete(state: CliState, kind: KindInfo, names: tuple[str, ...], namespace: str | None,
           wait: bool, timeout: float) -> None:
    """Delete objects. Jobs and clusters are torn down first ("deleting"), then removed.

    \b
    Examples:
      skyctl delete job train
      skyctl delete svc web -n prod
      skyctl delete cluster kind-1 --wait
    """
    client = state.client()
    ns = state.namespace(namespace) if kind.namespaced else None
    pending: list[tuple[str, str | None]] = []
    for name in names:
        since = deleting_since(client, kind, name, ns)
        result = client.delete(kind.kind, name, ns)
        obj = result.object or {"metadata": {"name": name}}
        ref = object_ref(kind.kind, obj)
        if result.pending and since:
            click.echo(f"{ref} is already being deleted (since {since}); its lifecycle is "
                       f"still tearing it down: `skyctl describe {kind.kind.lower()} {name}`")
        else:
            click.echo(f"{ref} {'deleting' if result.pending else 'deleted'}")
        if result.pending:
            pending.append((name, (obj.get("metadata") or {}).get("resourceVersion")))
    deadline = time.monotonic() + timeout
    for name, rv in pending if wait else []:
        if not wait_gone(client, kind, name, ns, rv, deadline):
            raise CliError(f"{kind.kind.lower()}/{name} still exists after {timeout:g}s")
        click.echo(f"{kind.kind.lower()}/{name} deleted")


def deleting_since(client: SkyShiftClient, kind: KindInfo, name: str, ns: str | None) -> str:
    """The object's deletionTimestamp ('' when it is not being deleted, or not there: the
    DELETE that follows says so)."""
    try:
        obj = client.get(kind.kind, name, ns)
    except ApiError:
        return ""
    return str((obj.get("metadata") or {}).get("deletionTimestamp") or "")


def wait_gone(client: SkyShiftClient, kind: KindInfo, name: str, ns: str | None,
              rv: str | None, deadline: float) -> bool:
    """Watch one object until it is deleted; False when ``deadline`` passes first."""
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            client.get(kind.kind, name, ns)
        except ApiError as exc:
            if exc.not_found:
                return True
            raise
        for event in client.watch(kind.kind, name, ns, rv, timeout=min(remaining, 30)):
            if event.type == "DELETED":
                return True
            rv = event.resource_version or rv
        time.sleep(0.2)  # the stream ended early: look again, without spinning
    return False
