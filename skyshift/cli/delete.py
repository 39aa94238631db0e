"""``skyctl delete KIND NAME...``: says whether the object is gone or still being torn down.

Kinds with a lifecycle (jobs, clusters, services) answer 202: their workflow first removes what
they run on the clusters, so the CLI prints ``deleting`` rather than pretending it is done.
"""

from __future__ import annotations

import click

from skyshift.cli.kinds import KIND
from skyshift.cli.output import object_ref
from skyshift.cli.state import CliState, pass_state
from skyshift.models import KindInfo


@click.command("delete")
@click.argument("kind", type=KIND)
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the objects.")
@pass_state
def delete(state: CliState, kind: KindInfo, names: tuple[str, ...], namespace: str | None) -> None:
    """Delete objects. Jobs and clusters are torn down first ("deleting"), then removed.

    \b
    Examples:
      skyctl delete job train
      skyctl delete svc web -n prod
      skyctl delete cluster kind-1
    """
    client = state.client()
    ns = state.namespace(namespace) if kind.namespaced else None
    for name in names:
        result = client.delete(kind.kind, name, ns)
        ref = object_ref(kind.kind, result.object or {"metadata": {"name": name}})
        click.echo(f"{ref} {'deleting' if result.pending else 'deleted'}")
