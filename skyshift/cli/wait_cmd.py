"""``skyctl wait KIND NAME --for phase=Succeeded|delete``: block until it is so, or time out.

It follows the API's watch (see :meth:`SkyShiftClient.wait`), so it answers as soon as the
change is written, and exits 1 with what it waited for and where the object stood on timeout.
"""

from __future__ import annotations

import click

from skyshift.cli.errors import UsageProblem
from skyshift.cli.kinds import KIND, NAME
from skyshift.cli.state import CliState, pass_state
from skyshift.client.waiting import WaitFor, parse_for
from skyshift.models import KindInfo


@click.command("wait")
@click.argument("kind", type=KIND)
@click.argument("name", type=NAME)
@click.option("--for", "until", required=True, metavar="phase=PHASE|delete",
              help="What to wait for: a phase (any, e.g. phase=Running) or the object's deletion.")
@click.option("--namespace", "-n", default=None, metavar="NS", help="Namespace of the object.")
@click.option("--timeout", type=click.FloatRange(min=0), default=300, show_default=True,
              metavar="SECONDS", help="Give up (exit 1) after this long.")
@pass_state
def wait(state: CliState, kind: KindInfo, name: str, until: str, namespace: str | None,
         timeout: float) -> None:
    """Wait until an object reaches a phase or is deleted.

    \b
    Examples:
      skyctl wait job train --for phase=Succeeded --timeout 600
      skyctl wait cluster kind-1 --for phase=Ready
      skyctl wait job train --for delete
    """
    try:
        cond: WaitFor = parse_for(until)
    except ValueError as exc:
        raise UsageProblem(f"--for: {exc}") from None
    ns = state.namespace(namespace) if kind.namespaced else None
    state.client().wait(kind.kind, name, ns, until=cond, timeout=timeout)
    ref = f"{kind.kind.lower()}/{name}"
    click.echo(f"{ref} deleted" if cond.delete else f"{ref} condition met ({cond})")
