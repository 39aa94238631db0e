"""The ``skyshift`` command: ``up``, ``down`` and ``status`` of the embedded local stack.

Only presentation lives here (click options, rich spinners and tables, exit codes); the work is
in :mod:`skyshift.devstack.stack`. Every failure is one ``error:`` line and a non-zero exit code.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.status import Status
from rich.table import Table

from skyshift.config import skyshift_home
from skyshift.devstack import isolation, stack
from skyshift.devstack.components import METRICS_PORT, METRICS_PROCESSES, Component, StackError
from skyshift.devstack.ha import TEMPORAL_DBS
from skyshift.devstack.local import (
    LOCAL_CLUSTER,
    attach_local_cluster,
    ensure_run_user,
    write_local_context,
)
from skyshift.devstack.login import ADMIN, admin_login
from skyshift.devstack.metrics_targets import targets_path
from skyshift.devstack.replay_cli import replay_check
from skyshift.devstack.sim.cli import sim

F = TypeVar("F", bound=Callable[..., Any])


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160, highlight=False)


def _fail(message: str) -> None:
    first, _, rest = message.partition("\n")
    err = _console(stderr=True)
    err.print(f"[bold red]error:[/] {first}", soft_wrap=True, markup=True)
    if rest:
        err.print(rest, markup=False, highlight=False, soft_wrap=True, style="dim")


def handle_errors(func: F) -> F:
    """Turn every failure into one clear line (set SKYSHIFT_DEBUG=1 for the traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except StackError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted (processes started so far keep running; `skyshift down` stops them)")
            sys.exit(130)
        except Exception as exc:
            if os.environ.get("SKYSHIFT_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {exc} (set SKYSHIFT_DEBUG=1 for the traceback)")
        sys.exit(1)

    return wrapper  # type: ignore[return-value]


class ConsoleReporter:
    """Spinner per component on a terminal, one plain line per event otherwise."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self._status: Status | None = None
        self._pid = 0
        self._next_line = 0.0

    def info(self, message: str) -> None:
        self.console.print(f"[dim]{message}[/]")

    def skipped(self, component: Component, why: str) -> None:
        self.console.print(f"[dim]- {component.name}: skipped: {why}[/]")

    def begin(self, component: Component, pid: int, reused: bool) -> None:
        self._pid = pid
        verb = "Checking" if reused else "Starting"
        if self.live:
            self._status = self.console.status(f"{verb} {component.title} (pid {pid})...")
            self._status.start()
        elif not reused:
            self.console.print(f"  {component.name}: starting (pid {pid})")
        self._next_line = 5.0

    def progress(self, component: Component, elapsed: float, detail: str) -> None:
        if self._status is not None:
            self._status.update(
                f"Waiting for {component.title} (pid {self._pid}) [dim]{elapsed:4.1f}s  {detail}[/]"
            )
        elif elapsed >= self._next_line:  # plain output: a line every 5 s, not every poll
            self._next_line = elapsed + 5.0
            self.console.print(f"  {component.name}: waiting ({elapsed:.0f}s): {detail}")

    def end(self, component: Component, ok: bool, elapsed: float, reused: bool) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if not ok:
            self.console.print(f"[red]x[/] {component.name}: failed after {elapsed:.1f}s")
        elif reused:
            self.console.print(f"[green]✓[/] {component.name}: already running (pid {self._pid})")
        else:
            self.console.print(
                f"[green]✓[/] {component.name}: healthy in {elapsed:.1f}s (pid {self._pid})"
            )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SKYSHIFT_HOME",
    help="Directory for state, config and logs (env SKYSHIFT_HOME, default ~/.skyshift).",
)
def main(home: Path | None) -> None:
    """Run SkyShift on this machine: etcd, the Temporal dev server, the API server, the control
    worker and the skylet manager, with this machine attached as the cluster `local`."""
    if home is not None:
        os.environ["SKYSHIFT_HOME"] = str(home.expanduser().absolute())


def _port(flag: str, env: str, what: str) -> Callable[[F], F]:
    return click.option(
        flag,
        type=click.IntRange(1, 65535),
        envvar=env,
        default=None,
        help=f"Port of {what} (env {env}; default: last run's, else the standard one).",
    )


def _isolate(console: Console, home: Path, result: stack.UpResult) -> str | None:
    """Keep local workloads off the control plane (as root) and print what is enforced and
    what is not. Returns the user the local cluster's replicas run as (None: as we do)."""
    run_as = ensure_run_user() if os.geteuid() == 0 else None
    state = stack.StackState.load(home)
    done = isolation.enforce(home, result.ports, state.components if state else {})
    for line in done.enforced:
        console.print(f"[green]✓[/] {line}", soft_wrap=True)
    if done.missing:
        console.print("[yellow]![/] not enforced:", soft_wrap=True)
        for line in done.missing:
            console.print(f"  [yellow]-[/] {line}", soft_wrap=True)
    return run_as


@main.command()
@_port("--etcd-port", "SKYSHIFT_ETCD_PORT", "etcd's client URL")
@_port("--etcd-peer-port", "SKYSHIFT_ETCD_PEER_PORT", "etcd's peer URL")
@_port("--temporal-port", "SKYSHIFT_TEMPORAL_PORT", "the Temporal frontend (gRPC)")
@_port("--ui-port", "SKYSHIFT_UI_PORT", "the Temporal Web UI")
@_port("--api-port", "SKYSHIFT_API_PORT", "the SkyShift API server")
@_port("--postgres-port", "SKYSHIFT_POSTGRES_PORT", "PostgreSQL, Temporal's store under --ha")
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535 - len(METRICS_PROCESSES) + 1),
    envvar="SKYSHIFT_METRICS_PORT",
    default=None,
    help=f"First of the Prometheus metrics ports: the API, the control worker and the skylet "
    f"manager take it and the next ones (env SKYSHIFT_METRICS_PORT; default: last run's, else "
    f"{METRICS_PORT}). Turns metrics back on after --no-metrics.",
)
@click.option(
    "--no-metrics",
    is_flag=True,
    help="Serve no metrics (remembered by later `up`s until --metrics-port is given).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds to wait for each component to become healthy (default: per component).",
)
@click.option(
    "--ha",
    is_flag=True,
    help="The production topology on this machine: 3 etcd members (TLS), the Temporal server "
    "with an mTLS frontend and its UI, 2 API replicas behind HAProxy, 2 control workers, 2 "
    "skylet managers (docs/production.md).",
)
@click.option(
    "--temporal-db",
    type=click.Choice(TEMPORAL_DBS),
    envvar="SKYSHIFT_TEMPORAL_DB",
    default=None,
    help="Temporal's store under --ha: a PostgreSQL server of the stack (Debian's postgresql "
    "package), or SQLite in a file (env SKYSHIFT_TEMPORAL_DB; default: last run's, else "
    "postgres).",
)
@handle_errors
def up(
    etcd_port: int | None,
    etcd_peer_port: int | None,
    temporal_port: int | None,
    ui_port: int | None,
    api_port: int | None,
    postgres_port: int | None,
    metrics_port: int | None,
    no_metrics: bool,
    timeout: float | None,
    ha: bool,
    temporal_db: str | None,
) -> None:
    """Start the local stack in the background, or reuse what already runs.

    Waits until every part is healthy, attaches this machine as the cluster `local`, makes the
    CLI context `local` current and prints where each part listens. Ports are remembered in
    $SKYSHIFT_HOME/stack.json for later commands.
    """
    home = skyshift_home()
    console = _console()
    flags = {
        "etcd": etcd_port,
        "etcd_peer": etcd_peer_port,
        "temporal": temporal_port,
        "ui": ui_port,
        "api": api_port,
        "postgres": postgres_port,
        "metrics": 0 if no_metrics else metrics_port,
    }
    if no_metrics and metrics_port is not None:
        raise click.UsageError("--no-metrics and --metrics-port contradict each other")
    result = stack.up(home, flags, ConsoleReporter(console), timeout=timeout, ha=ha,
                      temporal_db=temporal_db)
    api_url = result.urls["api"]
    user = token = None
    front = "haproxy" if ha else "api"  # what the CLI talks to
    if front in result.started or front in result.reused:
        user, token = ADMIN, admin_login(api_url, home).token
        console.print("[green]✓[/] CLI logged in as admin")
        run_as = _isolate(console, home, result)
        outcome = attach_local_cluster(api_url, home, token, run_as)
        console.print(f"[green]✓[/] cluster {LOCAL_CLUSTER}: {outcome}")
    write_local_context(home, api_url, user, token, result.urls["temporal_ui"])

    title = "SkyShift is up (--ha)" if ha else "SkyShift is up"
    table = Table(title=title, title_justify="left", show_header=True)
    table.add_column("part")
    table.add_column("where", overflow="fold")
    api_note = "" if "api" not in result.skipped else "  [dim](API not installed)[/]"
    api = result.urls["api"] + ("  (HAProxy, 2 replicas behind it)" if ha else "")
    rows = [
        ("etcd", result.urls["etcd"]),
        ("Temporal gRPC", result.urls["temporal"]),
        *([("Temporal store", result.urls["temporal_store"])] if ha else []),
        ("Temporal UI", result.urls["temporal_ui"]),
        ("API", api + api_note),
        ("OpenAPI docs", result.urls["docs"] + api_note),
        *_metrics_rows(home, result),
        ("logs", result.urls["logs"]),
    ]
    for part, where in rows:
        table.add_row(part, where)
    console.print(table)
    console.print("[dim]CLI context `local` is current; `skyshift down` stops everything.[/]")


def _metrics_rows(home: Path, result: stack.UpResult) -> list[tuple[str, str]]:
    """One row per process that serves Prometheus metrics, then the file_sd targets file."""
    if not result.metrics:
        return [("metrics", "off (--metrics-port turns them on)")]
    rows = [(f"metrics: {name}", url) for name, url in result.metrics.items()]
    return [*rows, ("Prometheus targets", str(targets_path(home)))]


@main.command()
@click.option(
    "--purge", is_flag=True,
    help="Also stop local replicas and service proxies and delete the data (etcd, Temporal db, "
         "local clusters under the home, logs).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=stack.DEFAULT_GRACE,
    show_default=True,
    help="Seconds to wait after SIGTERM before SIGKILL.",
)
@handle_errors
def down(purge: bool, grace: float) -> None:
    """Stop everything `skyshift up` started, in reverse order.

    Each process group gets SIGTERM, then SIGKILL after the grace period. Data stays for the next
    `up` unless --purge is given; the CLI config is always kept. Replicas of local clusters keep
    running (the next `up` finds them again); --purge stops them (and the HAProxies of their
    services) before it deletes their directories: `local` and every local cluster kept under
    $SKYSHIFT_HOME/clusters (the default state_dir of a local cluster).
    """
    home = skyshift_home()
    console = _console()
    stopped = stack.down(home, purge=purge, grace=grace)
    any_running = False
    for item in stopped:
        if item.outcome in ("stopped", "killed"):
            any_running = True
            how = "stopped" if item.outcome == "stopped" else "killed after the grace period"
            pid = f" (pid {item.pid})" if item.pid is not None else ""
            console.print(f"[green]✓[/] {item.name}: {how}{pid}")
        elif item.outcome == "removed":
            console.print(f"[green]✓[/] {item.name}: removed")
        elif item.outcome == "stale pid file":
            console.print(f"[dim]- {item.name}: removed stale pid file[/]")
    if not any_running:
        console.print("nothing was running")
    if purge:
        console.print(f"purged data under {home}")


@main.command()
@handle_errors
def status() -> None:
    """Show each part of the local stack: running or stopped, pid, address, health.

    Exits 0 when every installed part runs and is healthy, 1 otherwise.
    """
    home = skyshift_home()
    console = _console()
    statuses = stack.status(home)
    table = Table(show_header=True)
    for col in ("component", "state", "pid", "address", "metrics", "health"):
        table.add_column(col, overflow="fold")
    for s in statuses:
        state = "[green]running[/]" if s.running else "[dim]stopped[/]"
        if not s.installed and not s.running:
            state = "[dim]not installed[/]"
        if s.running:
            mark = "[green]healthy[/]" if s.healthy else f"[red]unhealthy[/] [dim]{s.detail}[/]"
        else:
            mark = "[dim]-[/]"
        table.add_row(s.name, state, str(s.pid or "-"), s.address, s.metrics or "-", mark)
    console.print(table)
    ok = stack.all_healthy(statuses)
    console.print("all healthy" if ok else "[yellow]not all healthy[/]")
    sys.exit(0 if ok else 1)


main.add_command(sim)
main.add_command(replay_check)

if __name__ == "__main__":
    main()
