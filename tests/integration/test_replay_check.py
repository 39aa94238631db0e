"""``skyshift replay-check`` against the real dev server: the upgrade gate of docs/production.md.

A job runs to Succeeded on the real Temporal dev server, etcd and the control worker; the command
(run as an operator runs it, a process configured by ``SKYSHIFT_TEMPORAL_ADDRESS``) replays that
job's history with this code and passes. The same histories replayed with a changed workflow
class under the job workflow's name (the list of classes is the check's parameter) fail, naming
the job's workflow id: what a change made without ``workflow.patched`` looks like before rollout.
"""

from __future__ import annotations

import asyncio
import io
import sys
from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console
from temporalio import workflow

from skyshift.contract.names import WF_JOB, job_workflow_id
from skyshift.devstack.replay_cli import Options, check
from skyshift.workers.control import WORKFLOWS
from skyshift.workflows.job import JobWorkflow
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_temporal_server import (  # noqa: F401 (fixtures)
    mtls_stack,
    run_job_to_succeeded,
    temporal_mtls,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@workflow.defn(name=WF_JOB)
class ChangedJobWorkflow:
    """JobWorkflow's name on code that waits on a timer first: not what the history recorded."""

    @workflow.run
    async def run(self, inp: Any) -> None:
        await workflow.sleep(timedelta(seconds=1))


async def run_command(s: LifecycleStack, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skyshift.devstack",
        "replay-check",
        *args,
        env=s.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_replay_check_passes_then_catches_a_changed_workflow(
    lifecycle_stack: LifecycleStack,
) -> None:
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("rc-a", cpus=2)
    await s.cluster_phase("rc-a", "Ready")
    await s.submit("rc-ok", "echo upgraded; sleep 0.2")
    await s.job_phase("rc-ok", "Succeeded")
    wf_id = job_workflow_id("default", "rc-ok")
    run_id = (await s.client.get_workflow_handle(wf_id).describe()).run_id

    code, out = await run_command(s, "--verbose")
    assert code == 0, out
    assert f"ok JobWorkflow {wf_id} run {run_id}" in out
    assert "every history replays with this code" in out
    assert "FAILED" not in out

    changed = [ChangedJobWorkflow, *(cls for cls in WORKFLOWS if cls is not JobWorkflow)]
    buf = io.StringIO()
    code = await check(s.client, changed, Console(file=buf, width=200), Options(since=1))
    out = buf.getvalue()
    assert code == 1, out
    assert f"FAILED JobWorkflow {wf_id} run {run_id}" in out
    assert "NondeterminismError: [TMPRL1100] Nondeterminism error" in out, out
    assert "do not replay with this code" in out


async def test_replay_check_over_mtls_on_the_temporal_server(
    mtls_stack: LifecycleStack,  # noqa: F811
) -> None:
    """The Temporal server of scripts/build-temporal.sh (SQLite and PostgreSQL stores), its
    frontend requiring a client certificate: the command connects with SKYSHIFT_TEMPORAL_TLS_*
    alone, as the workers do, and that server's visibility answers its queries."""
    s = mtls_stack
    await run_job_to_succeeded(s, "rcm-local", "rcm-job", "echo hello")
    code, out = await run_command(s, "--verbose")
    assert code == 0, out
    assert f"ok JobWorkflow {job_workflow_id('default', 'rcm-job')} run " in out
    code, out = await run_command(s, "--limit", "1")
    assert code == 0, out
    assert "1 workflow runs to replay" in out
    assert "more workflows matched than --limit 1: the rest were not checked" in out
