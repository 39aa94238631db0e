"""``skyctl create cluster ... --wait``: follow a cluster until it is Ready (or Failed), showing
its status message (a provisioned cluster's launch progress) on one live line.

On a terminal the line is a rich status spinner; in pipes each new message is printed once on
stderr, so scripts see the progress too and stdout stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click
from rich.console import Console

from skyshift.cli.render import printable
from skyshift.client import SkyShiftClient
from skyshift.client.errors import ApiError

DONE = ("Ready", "Failed", "Error")
POLL = 1.0


def describe(obj: dict[str, Any]) -> str:
    """``Provisioning: launching c1-ab12cd-0 on slurm/sim-1 (2 nodes, attempt 1, ETA 12:41)``."""
    status = obj.get("status") or {}
    prov = status.get("provision") or {}
    line = f"{status.get('phase') or 'Init'}: {status.get('message') or '...'}"
    extra = []
    if prov.get("infra"):
        extra.append(str(prov["infra"]))
    if prov.get("nodes"):
        extra.append(f"{prov['nodes']} nodes up")
    if prov.get("attempts"):
        extra.append(f"attempt {prov['attempts']}")
    if prov.get("eta"):
        extra.append(f"ETA {str(prov['eta'])[11:19]} UTC")
    return line + (f" ({', '.join(extra)})" if extra else "")


def wait_ready(client: SkyShiftClient, name: str, timeout: float) -> dict[str, Any]:
    """Poll the cluster until its phase is Ready, Failed or Error; raises ClickException on a
    timeout or when the cluster is gone."""
    deadline = time.monotonic() + timeout
    console = Console(stderr=True, highlight=False, markup=False, emoji=False)
    shown = ""
    live = console.is_terminal
    with console.status("waiting for the cluster", spinner="dots") if live else _Null() as st:
        while time.monotonic() < deadline:
            try:
                obj = client.get("Cluster", name)
            except ApiError as exc:
                if exc.not_found:
                    raise click.ClickException(f"cluster {name} is gone") from None
                raise
            line = describe(obj)
            if line != shown:
                shown = line
                if live and st is not None:
                    st.update(line)
                else:
                    click.echo(line, err=True)
            if (obj.get("status") or {}).get("phase") in DONE:
                return obj
            time.sleep(POLL)
    raise click.ClickException(f"cluster {name} not Ready after {timeout:.0f} s: {shown}")


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def finish(obj: dict[str, Any]) -> None:
    """Exit non-zero when the cluster ended Failed or Error (its message says why)."""
    status = obj.get("status") or {}
    if status.get("phase") != "Ready":
        click.echo(f"error: cluster {obj['metadata']['name']} is {status.get('phase')}: "
                   f"{printable(status.get('message'))}", err=True)
        sys.exit(1)
    click.echo(f"cluster/{obj['metadata']['name']} Ready")
