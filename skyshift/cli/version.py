"""``skyctl version``: the client's version and whether the configured server answers."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version

import click

from skyshift.cli.state import CliState, pass_state
from skyshift.client import ApiError


def client_version() -> str:
    try:
        return dist_version("skyshift")
    except PackageNotFoundError:
        return "unknown (not installed)"


@click.command("version")
@click.option("--client", "client_only", is_flag=True, help="Only the client version.")
@pass_state
def version(state: CliState, client_only: bool) -> None:
    """Print the skyctl version and the server it talks to.

    \b
    Example:
      skyctl version
    """
    click.echo(f"Client Version: {client_version()}")
    if client_only:
        return
    server = state.server_url()
    try:
        state.client().healthz()
        click.echo(f"Server: {server} (healthy)")
    except ApiError as exc:
        click.echo(f"Server: {server} (not reachable: {exc.reason})")
