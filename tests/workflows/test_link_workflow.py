"""LinkWorkflow on the time-skipping server with same-name fakes: the phase and message a user
reads in ``skyctl get links`` (direct, through a gateway, not reachable, a cluster missing),
status written only on change, and deletion."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from skyshift.contract.jobs import DeleteRequest, SpecChanged
from skyshift.contract.links import LinkInput, LinkView, ProbeResult
from skyshift.contract.names import SIG_DELETE, SIG_ENSURE, SIG_SPEC, link_workflow_id
from skyshift.workflows.link import LinkWorkflow
from tests.workflows.fakes import run_workers, unique
from tests.workflows.fakes import start as start_tracked
from tests.workflows.owned_fakes import LinkFakes
from tests.workflows.record import replays

pytestmark = pytest.mark.asyncio
GATEWAY = LinkView(
    True, generation=1, source="a", target="b", gateway_address="10.0.0.9", gateway_port=4443
)


async def start(client: Client, q: str, inp: LinkInput) -> WorkflowHandle[LinkWorkflow, str]:
    h: WorkflowHandle[LinkWorkflow, str] = await start_tracked(
        client, LinkWorkflow.run, inp, link_workflow_id(inp.name), q
    )
    return h


def link() -> LinkInput:
    return LinkInput(unique("l"), str(uuid.uuid4()), refresh=30.0)


def statuses(fakes: LinkFakes) -> list[tuple[str, str]]:
    return [(p.phase, p.message) for p in fakes.of("write_link_status")]


async def test_direct_link_is_ready_and_written_once(workflow_env: WorkflowEnvironment) -> None:
    fakes = LinkFakes()
    async with run_workers(workflow_env.client, [LinkWorkflow], fakes.link(), [], []) as q:
        inp = link()
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("write_link_status")
        await workflow_env.sleep(95)  # three more rounds, nothing changed
        await fakes.wait_for("view_link", 4)
        assert statuses(fakes) == [
            ("Ready", "direct: a and b reach each other's replica addresses (no gateway)")
        ]
        fakes.view = LinkView(True, source="a", target="b", problem="cluster b does not exist")
        await h.signal(SIG_SPEC, SpecChanged(2))  # looked at at once, not at the next round
        await fakes.wait_for("write_link_status", 2)
        assert statuses(fakes)[-1] == ("Error", "cluster b does not exist")
        await h.signal(SIG_DELETE, DeleteRequest(inp.uid))
        assert await h.result() == "Deleted"
    assert fakes.names()[-1] == "remove_object"
    assert fakes.of("remove_object")[0].plural == "links"
    await replays(h, "link_direct_error_deleted")


async def test_gateway_is_probed_from_the_source_cluster(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = LinkFakes(view=GATEWAY, probe=ProbeResult(False, "connection refused"))
    async with run_workers(
        workflow_env.client, [LinkWorkflow], fakes.link(), [fakes.probe_tcp], ["a"]
    ) as q:
        inp = link()
        h = await start(workflow_env.client, q, inp)
        await fakes.wait_for("write_link_status")
        assert statuses(fakes) == [
            ("Error", "gateway 10.0.0.9:4443 is not reachable from cluster a: connection refused")
        ]
        fakes.probe = ProbeResult(True)
        await workflow_env.sleep(31)
        await fakes.wait_for("write_link_status", 2)
        assert statuses(fakes)[-1] == ("Ready", "a reaches b through gateway 10.0.0.9:4443")
        probe = fakes.of("probe_tcp")[0]
        assert (probe.address, probe.port) == ("10.0.0.9", 4443)
        await h.signal(SIG_ENSURE, LinkInput(inp.name, inp.uid, deleting=True))
        assert await h.result() == "Deleted"
    await replays(h, "link_gateway_deleted")


async def test_source_skylet_not_answering_is_an_error(
    workflow_env: WorkflowEnvironment,
) -> None:
    fakes = LinkFakes(view=GATEWAY)
    async with run_workers(workflow_env.client, [LinkWorkflow], fakes.link(), [], []) as q:
        h = await start(workflow_env.client, q, link())  # no worker on skylet-a
        await workflow_env.sleep(11)  # the probe's schedule-to-start timeout
        await fakes.wait_for("write_link_status")
        phase, message = statuses(fakes)[0]
        assert phase == "Error" and message.startswith("cluster a's skylet did not answer")
        await h.signal(SIG_DELETE, DeleteRequest())
        assert await h.result() == "Deleted"


async def test_link_gone_from_store_is_removed(workflow_env: WorkflowEnvironment) -> None:
    fakes = LinkFakes(view=LinkView(found=False))
    async with run_workers(workflow_env.client, [LinkWorkflow], fakes.link(), [], []) as q:
        h = await start(workflow_env.client, q, link())
        assert await h.result() == "Deleted"
    assert fakes.names() == ["view_link", "remove_object"]
