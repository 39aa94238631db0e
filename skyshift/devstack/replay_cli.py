"""``skyshift replay-check``: the gate before rolling out workers of a new version.

Presentation only (options, progress, the summary and exit codes); listing and replaying are
:mod:`skyshift.workers.replay`. The worker code is imported when the command runs, so ``skyshift
up`` does not pay for it. Exit codes: 0 every history replays, 1 at least one does not, 2 the
check could not run (Temporal unreachable, bad TLS settings, bad arguments).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from temporalio.client import Client

    from skyshift.workers.replay import Listing, Report

CANNOT_RUN = 2
DEFAULT_SINCE = 24.0  # hours
DEFAULT_LIMIT = 1000
CONCURRENCY = 4  # histories fetched at a time
PLAIN_EVERY = 50  # without a terminal: a progress line every this many workflows
HELP = {
    "address": "Temporal frontend (default: SKYSHIFT_TEMPORAL_ADDRESS, else 127.0.0.1:7233).",
    "namespace": "Temporal namespace (default: SKYSHIFT_TEMPORAL_NAMESPACE, else default).",
    "since": f"Also replay workflows closed in the last this many hours (default "
    f"{DEFAULT_SINCE:g}; 0: open ones only).",
    "limit": f"At most this many workflow runs, open ones first (default {DEFAULT_LIMIT}).",
    "conc": f"Histories fetched at a time (default {CONCURRENCY}).",
}


class CheckError(click.ClickException):
    """The check could not run: one ``error:`` line for the user, exit code 2."""

    exit_code = CANNOT_RUN

    def show(self, file: IO[Any] | None = None) -> None:
        err = Console(stderr=True, highlight=False)
        err.print(f"[bold red]error:[/] {escape(self.message)}", soft_wrap=True, markup=True)


@dataclass(frozen=True)
class Options:
    """What to replay and how: the command's options."""

    since: float = DEFAULT_SINCE  # hours
    limit: int = DEFAULT_LIMIT
    concurrency: int = CONCURRENCY
    verbose: bool = False


def _progress(console: Console) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A spinner line on a terminal, a plain line every PLAIN_EVERY workflows otherwise;
    returns (update, stop)."""
    if console.is_terminal:
        status = console.status("replaying...")
        status.start()

        def update(done: int, total: int) -> None:
            status.update(f"replayed {done} of {total}")

        return update, status.stop

    def plain(done: int, total: int) -> None:
        if done % PLAIN_EVERY == 0 and done < total:
            console.print(f"replayed {done} of {total}")

    return plain, lambda: None


def print_report(console: Console, listing: Listing, report: Report, verbose: bool) -> None:
    table = Table(title="Replay per workflow type", title_justify="left")
    for column in ("workflow type", "replayed", "failed"):
        table.add_column(column)
    for wf_type, (replayed, failed) in report.by_type().items():
        table.add_row(wf_type, str(replayed), f"[red]{failed}[/]" if failed else "0")
    console.print(table)
    if verbose:
        for ex in report.passed:
            console.print(f"ok {ex.workflow_type} {ex.workflow_id} run {ex.run_id}", markup=False)
    for ex in report.gone:
        console.print(f"gone before it was fetched: {ex.workflow_id} run {ex.run_id}", markup=False)
    if listing.left_out:
        console.print(
            f"[yellow]![/] more workflows matched than --limit {len(listing.executions)}:"
            " the rest were not checked"
        )
    for f in report.failures:
        ex = f.execution
        console.print(f"[bold red]FAILED[/] {ex.workflow_type} {ex.workflow_id} run {ex.run_id}")
        console.print("  " + f.error.replace("\n", "\n  "), markup=False, highlight=False)
    failed = len(report.failures)
    total = sum(report.replayed.values())
    if failed:
        console.print(f"[red]{failed} of {total} histories do not replay with this code[/]")
    else:
        console.print(f"[green]replayed {total}: every history replays with this code[/]")


async def check(
    client: Client,
    workflows: Sequence[type],
    console: Console,
    options: Options = Options(),
    *,
    sandbox: bool = False,
) -> int:
    """List, replay with ``workflows`` and print; the exit code (CheckError: cannot run)."""
    from temporalio.service import RPCError

    from skyshift.workers.replay import list_executions, queries, replay

    cutoff = datetime.now(UTC) - timedelta(hours=options.since)
    try:
        listing = await list_executions(client, cutoff, options.limit)
    except RPCError as exc:
        raise CheckError(f"cannot list workflows on Temporal: {exc}") from None
    console.print(
        f"{len(listing.executions)} workflow runs to replay ({queries(cutoff)[0]}, and "
        f"those closed in the last {options.since:g} h)",
        markup=False,
    )
    update, stop = _progress(console)
    try:
        report = await replay(
            client,
            listing.executions,
            workflows,
            sandbox=sandbox,
            concurrency=options.concurrency,
            progress=update,
        )
    except RPCError as exc:
        raise CheckError(f"cannot fetch histories from Temporal: {exc}") from None
    finally:
        stop()
    print_report(console, listing, report, options.verbose)
    return report.exit_code


async def _connect(address: str | None, namespace: str | None) -> Client:
    from skyshift.config import Settings
    from skyshift.lifecycle.client import connect

    settings = Settings.from_env()
    address = address or settings.temporal_address
    namespace = namespace or settings.temporal_namespace
    try:
        return await connect(address, namespace)
    except ValueError as exc:  # a SKYSHIFT_TEMPORAL_TLS_* file
        raise CheckError(str(exc)) from None
    except Exception as exc:
        raise CheckError(
            f"cannot reach Temporal at {address} (namespace {namespace}): "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None


async def _run(address: str | None, namespace: str | None, options: Options) -> int:
    from skyshift.workers.common import env_flag
    from skyshift.workers.control import WORKFLOWS

    client = await _connect(address, namespace)
    console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
    sandbox = env_flag("SKYSHIFT_WORKFLOW_SANDBOX")
    return await check(client, WORKFLOWS, console, options, sandbox=sandbox)


@click.command("replay-check")
@click.option("--address", metavar="HOST:PORT", help=HELP["address"])
@click.option("--namespace", help=HELP["namespace"])
@click.option("--since", type=click.FloatRange(min=0), default=DEFAULT_SINCE, help=HELP["since"])
@click.option("--limit", type=click.IntRange(min=1), default=DEFAULT_LIMIT, help=HELP["limit"])
@click.option("--concurrency", type=click.IntRange(1, 64), default=CONCURRENCY, help=HELP["conc"])
@click.option("-v", "--verbose", is_flag=True, help="Also list every run that replayed.")
def replay_check(
    address: str | None,
    namespace: str | None,
    since: float,
    limit: int,
    concurrency: int,
    verbose: bool,
) -> None:
    """Replay SkyShift's workflow histories from Temporal against this code.

    Run it with the code of the version you are about to roll out, against production's
    Temporal, before restarting any worker: a workflow whose history does not replay would fail
    on the new workers. Lists the workflows of the `skyshift-control` task queue (open ones, and
    those closed in the last --since hours), fetches their histories a few at a time and replays
    each with the workflow classes the control worker registers, its data converter and its
    sandbox setting (SKYSHIFT_WORKFLOW_SANDBOX). Connects as the workers do
    (SKYSHIFT_TEMPORAL_ADDRESS, SKYSHIFT_TEMPORAL_NAMESPACE, SKYSHIFT_TEMPORAL_TLS_*).

    Prints how many runs of each workflow type replayed and failed, and each failure with its
    workflow id, run id and the first lines of the error. Exits 0 when every history replays,
    1 when one does not, 2 when the check cannot run (Temporal unreachable, bad TLS settings).
    """
    options = Options(since, limit, concurrency, verbose)
    try:
        code = asyncio.run(_run(address, namespace, options))
    except click.ClickException:
        raise
    except KeyboardInterrupt:
        raise CheckError("interrupted: not every history was replayed") from None
    except Exception as exc:  # not a failed replay: the check did not run
        if os.environ.get("SKYSHIFT_DEBUG"):
            raise
        why = f"{type(exc).__name__}: {exc} (SKYSHIFT_DEBUG=1 shows the traceback)"
        raise CheckError(why) from None
    sys.exit(code)
