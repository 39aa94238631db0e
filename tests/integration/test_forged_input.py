"""Issue 26 on a real stack: whoever reaches Temporal can start a ServiceWorkflow, or a workflow of
its own that schedules ``apply_service`` on a cluster's skylet queue, with a service name that
carries newlines and HAProxy directives (``global`` / ``lua-load <file>``). The skylet refuses
both for good (InvalidInput), haproxy.cfg never holds the injected text, the Lua never runs, and
the cluster's real service keeps working."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from skyshift.compat.local.lb_run import run_dir
from skyshift.compat.types import ServicePort, ServiceSpec
from skyshift.contract import activity_names as act
from skyshift.contract.names import CONTROL_QUEUE, WF_SERVICE, skylet_queue
from skyshift.contract.services import (
    ApplyServiceInput,
    ApplyServiceResult,
    ServiceInput,
    ServiceTemplate,
)
from tests.fixtures.require import require_binary
from tests.fixtures.temporal import LifecycleStack
from tests.integration.test_service_lifecycle import add_service, service_phase

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@workflow.defn(name="forged-apply")
class ForgedApply:
    """What an attacker's own worker runs: one apply_service on the victim's skylet queue."""

    @workflow.run
    async def run(self, inp: ApplyServiceInput) -> ApplyServiceResult:
        result: ApplyServiceResult = await workflow.execute_activity(
            act.APPLY_SERVICE, inp, task_queue=skylet_queue(inp.cluster),
            result_type=ApplyServiceResult, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=5),
        )
        return result


def injected(lua: Path) -> str:
    return f"web\nglobal\n    lua-load {lua}\nfrontend evil"


async def test_forged_service_names_never_reach_haproxy(lifecycle_stack: LifecycleStack,
                                                        tmp_path: Path) -> None:
    require_binary("haproxy", "apt-get install haproxy")
    s = lifecycle_stack
    s.start_in_process()
    await s.add_cluster("forge-a", cpus=2)
    await s.cluster_phase("forge-a", "Ready")
    await s.submit("web", "sleep 600", labels={"app": "web"}, cpus=0.5, ports=[8080])
    await s.job_phase("web", "Running")
    await add_service(s, "web", selector={"app": "web"}, primaryCluster="forge-a")
    await service_phase(s, "web", "Ready")
    # where the skylet writes it (as root: HAProxy's own directory under /run/skyshift/lb)
    cfg = run_dir("forge-a", s.state_dirs["forge-a"] / "lb") / "haproxy.cfg"
    assert "frontend f_default.web_80" in cfg.read_text()

    marker = tmp_path / "lua-ran"
    lua = tmp_path / "evil.lua"
    lua.write_text(f'local f = io.open("{marker}", "w")\nf:write("ran")\nf:close()\n')
    name = injected(lua)

    # 1. a forged ServiceWorkflow (the probe's attack)
    handle = await s.client.start_workflow(
        WF_SERVICE, ServiceInput("default", name, str(uuid.uuid4()), 1, ServiceTemplate(
            selector={"app": "web"}, ports=[ServicePort(80, 8080)], primary_cluster="forge-a")),
        id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=CONTROL_QUEUE,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), 60)
    assert not marker.exists(), "haproxy ran the forged name's Lua"
    assert "lua-load" not in cfg.read_text()
    assert "InvalidInput" in _causes(failed.value)

    # 2. the attacker's own workflow scheduling the skylet's activity directly
    spec = ServiceSpec(name=name, namespace="default", ports=[ServicePort(80, 8080)],
                       backends={"8080": ["127.0.0.1:1;shutdown sessions"]})
    async with Worker(s.client, task_queue="attacker", workflows=[ForgedApply],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        with pytest.raises(WorkflowFailureError) as failed:
            await s.client.execute_workflow(
                ForgedApply.run, ApplyServiceInput("forge-a", spec),
                id=f"forged-apply-{uuid.uuid4().hex[:8]}", task_queue="attacker",
                execution_timeout=timedelta(seconds=60))
    cause = failed.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "InvalidInput" and cause.cause.non_retryable
    assert cause.retry_state is not None  # given up at once, not retried five times

    text = cfg.read_text()
    assert "lua-load" not in text and "evil" not in text and text.count("global") == 1
    assert not marker.exists()
    assert (await service_phase(s, "web", "Ready"))["status"]["cluster"] == "forge-a"


def _causes(err: BaseException) -> str:
    out: list[str] = []
    cur: BaseException | None = err
    while cur is not None:
        out.append(f"{type(cur).__name__}:{getattr(cur, 'type', '')}:{cur}")
        cur = cur.__cause__
    return " | ".join(out)
