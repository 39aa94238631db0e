"""Replay live histories against this code: the upgrade gate of ``skyshift replay-check``.

A worker of a new version takes over workflows started by the old one by replaying their
histories; a change that makes the code issue different commands for the same history
(non-determinism) breaks every such workflow. This module lists SkyShift's workflows on a
Temporal namespace (the ones on the control task queue: open ones, and those closed since a
given time), fetches their histories a few at a time and replays each with ``Replayer`` and the
workflow classes, data converter and sandbox setting the control worker uses (the skylet
managers run activities only, no workflows). The command itself is
:mod:`skyshift.devstack.replay_cli`.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from temporalio.client import Client, WorkflowHistory
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from skyshift.contract.names import CONTROL_QUEUE
from skyshift.lifecycle.converter import DATA_CONVERTER
from skyshift.workers import payload_hints

#: lines of a replay failure kept (the nondeterminism error's first lines)
ERROR_LINES = 6


@dataclass(frozen=True)
class Execution:
    """One run of a workflow, as the visibility listing gives it."""

    workflow_id: str
    run_id: str
    workflow_type: str


@dataclass
class Listing:
    executions: list[Execution]
    #: runs that matched but were left out by the limit (a lower bound: listing stops there)
    left_out: int = 0


@dataclass(frozen=True)
class Failure:
    execution: Execution
    error: str


@dataclass
class Report:
    """What a check found: per workflow type, how many replayed and which failed."""

    replayed: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    #: runs listed whose history was gone when fetched (deleted by retention meanwhile)
    gone: list[Execution] = field(default_factory=list)
    #: every run replayed without a failure
    passed: list[Execution] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def by_type(self) -> dict[str, tuple[int, int]]:
        """workflow type -> (replayed, failed), sorted by type."""
        failed = Counter(f.execution.workflow_type for f in self.failures)
        types = sorted(set(self.replayed) | set(failed))
        return {t: (self.replayed[t], failed[t]) for t in types}


def queries(since: datetime, task_queue: str = CONTROL_QUEUE) -> tuple[str, str]:
    """The visibility queries: open runs on ``task_queue``, then those closed after ``since``."""
    base = f"TaskQueue = '{task_queue}'"
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"{base} AND ExecutionStatus = 'Running'",
        f"{base} AND ExecutionStatus != 'Running' AND CloseTime > '{stamp}'",
    )


async def list_executions(client: Client, since: datetime, limit: int) -> Listing:
    """Open runs first (the ones a new worker takes over), then recently closed ones, at most
    ``limit`` in all. Raises RPCError when Temporal cannot be asked."""
    listing = Listing([])
    for query in queries(since):
        async for wf in client.list_workflows(query, page_size=min(limit, 1000)):
            if len(listing.executions) >= limit:
                listing.left_out += 1
                break  # one more is enough to say the limit cut the list
            listing.executions.append(Execution(wf.id, wf.run_id or "", wf.workflow_type))
    return listing


def workflow_runner(sandbox: bool) -> WorkflowRunner:
    """The runner the control worker uses (``SKYSHIFT_WORKFLOW_SANDBOX``, see its module)."""
    return SandboxedWorkflowRunner() if sandbox else UnsandboxedWorkflowRunner()


#: the message of the failure inside the SDK core's "activation completion failed" dump
_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')


def first_lines(error: BaseException, lines: int = ERROR_LINES) -> str:
    """The error's type and message: for a failed workflow task, the message of the failure the
    SDK core reports (``[TMPRL1100] Nondeterminism error: ...``) rather than its whole dump."""
    text = str(error)
    core = _CORE_MESSAGE.search(text)
    if core:
        text = core.group(1).replace('\\"', '"').replace("\\n", "\n")
    text = f"{type(error).__name__}: {text}".strip()
    return "\n".join(text.splitlines()[:lines])


def quiet_runtime() -> Runtime:
    """A runtime whose SDK core logs errors only: a history that does not replay is reported by
    the check, not also as a core warning on stderr."""
    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


async def _histories(
    client: Client,
    executions: Sequence[Execution],
    concurrency: int,
    report: Report,
    sent: deque[Execution],
) -> AsyncIterator[WorkflowHistory]:
    """Each execution's history in order, at most ``concurrency`` fetched ahead; appends the
    execution of each history given to ``sent`` (results come back in the same order)."""

    async def fetch(ex: Execution) -> tuple[Execution, WorkflowHistory | None]:
        handle = client.get_workflow_handle(ex.workflow_id, run_id=ex.run_id or None)
        try:
            return ex, await handle.fetch_history()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return ex, None

    pending: deque[asyncio.Task[tuple[Execution, WorkflowHistory | None]]] = deque()
    queue = iter(executions)
    try:
        while True:
            while len(pending) < concurrency and (ex := next(queue, None)) is not None:
                pending.append(asyncio.create_task(fetch(ex)))
            if not pending:
                return
            ex, history = await pending.popleft()
            if history is None:
                report.gone.append(ex)
            else:
                sent.append(ex)
                yield history
    finally:
        for task in pending:
            task.cancel()


async def replay(
    client: Client,
    executions: Sequence[Execution],
    workflows: Sequence[type],
    *,
    sandbox: bool = False,
    concurrency: int = 4,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> Report:
    """Replay every execution's history with ``workflows`` (the control worker's classes, or
    others under the same names); ``progress(done, total)`` after each one."""
    payload_hints.install()  # as the workers do: same decoding, less CPU
    report = Report()
    sent: deque[Execution] = deque()
    replayer = Replayer(
        workflows=workflows,
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(sandbox),
        runtime=quiet_runtime(),
    )
    done = 0
    stream = _histories(client, executions, concurrency, report, sent)
    async with replayer.workflow_replay_iterator(stream) as results:
        async for result in results:
            ex = sent.popleft()
            report.replayed[ex.workflow_type] += 1
            if result.replay_failure is None:
                report.passed.append(ex)
            else:
                report.failures.append(Failure(ex, first_lines(result.replay_failure)))
            done += 1
            progress(done + len(report.gone), len(executions))
    return report
