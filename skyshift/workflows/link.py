"""LinkWorkflow (``link/<name>``): whether a Link's clusters can reach each other, kept current.

Every ``refresh`` seconds (and at once on a spec change) it reads the link and its clusters
(``view_link``, a local activity): a cluster missing, being deleted or not Ready is an Error
saying which. With a gateway, the source cluster's skylet then opens a TCP connection to it
(``probe_tcp`` on ``skylet-<source>``, so from where SkyShift reaches that cluster): refused or
silent is an Error with the reason. Otherwise Ready. Status is written only when it changes, so
a healthy link costs one timer, one local activity and (with a gateway) one activity a round.
Deletion removes the object (a link holds nothing on the clusters yet).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from skyshift.contract import activity_names as act
    from skyshift.contract.links import (
        LinkInput,
        LinkRef,
        LinkStatusPatch,
        LinkView,
        ProbeInput,
        ProbeResult,
    )
    from skyshift.contract.names import (
        WF_LINK,
        link_workflow_id,
        skylet_queue,
    )
    from skyshift.workflows.common import (
        PHASE,
        STORE_RETRY,
        STORE_TIMEOUT,
        current_keywords,
        history_full,
        remove_object,
        upsert,
        wait,
    )
    from skyshift.workflows.lifecycle import Lifecycle

PROBE_RETRY = RetryPolicy(maximum_attempts=1)


@workflow.defn(name=WF_LINK)
class LinkWorkflow(Lifecycle[LinkInput]):
    input_type = LinkInput

    @workflow.init
    def __init__(self, inp: LinkInput) -> None:
        self.inp = inp
        self.deleting = inp.deleting
        self.spec_dirty = False
        self.successor: LinkInput | None = None
        self.written: LinkStatusPatch | None = None
        self.sa: dict[str, str] = {}

    def _ensured(self, newer: LinkInput) -> None:
        self.spec_dirty = True

    @workflow.run
    async def run(self, inp: LinkInput) -> str:
        self.sa = current_keywords()
        ref = LinkRef(inp.name, inp.uid)
        while True:
            if self.deleting:
                return await self._teardown(ref)
            self.spec_dirty = False
            view: LinkView = await workflow.execute_local_activity(
                act.VIEW_LINK, ref, result_type=LinkView, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
            if not view.found or view.deleting:
                self.deleting = True
                continue
            phase, message = await self._judge(view)
            await self._write(LinkStatusPatch(inp.name, inp.uid, phase, message,
                                              view.generation, link_workflow_id(inp.name)))
            if history_full(inp.history_limit):
                await self._continue_as_new(LinkInput(inp.name, inp.uid, refresh=inp.refresh))
            await wait(lambda: self.spec_dirty or self.deleting, timedelta(seconds=inp.refresh))

    async def _judge(self, view: LinkView) -> tuple[str, str]:
        if view.problem:
            return "Error", view.problem
        if not view.gateway_port:
            return "Ready", f"direct: {view.source} and {view.target} reach each other's " \
                "replica addresses (no gateway)"
        where = f"{view.gateway_address}:{view.gateway_port}"
        try:
            got: ProbeResult = await workflow.execute_activity(
                act.PROBE_TCP, ProbeInput(view.gateway_address, view.gateway_port),
                result_type=ProbeResult, task_queue=skylet_queue(view.source),
                schedule_to_start_timeout=timedelta(seconds=10),
                start_to_close_timeout=timedelta(seconds=10), retry_policy=PROBE_RETRY,
            )
        except ActivityError as err:
            return "Error", f"cluster {view.source}'s skylet did not answer ({err.cause or err})"
        if not got.ok:
            return "Error", f"gateway {where} is not reachable from cluster {view.source}: " \
                f"{got.error}"
        return "Ready", f"{view.source} reaches {view.target} through gateway {where}"

    async def _write(self, patch: LinkStatusPatch) -> None:
        if patch != self.written:
            await workflow.execute_local_activity(
                act.WRITE_LINK_STATUS, patch, start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=STORE_RETRY,
            )
            self.written = patch
        upsert([(PHASE, patch.phase)], self.sa)

    async def _teardown(self, ref: LinkRef) -> str:
        upsert([(PHASE, "Deleting")], self.sa)
        await remove_object("links", ref.name, ref.uid)
        return await self._deleted()
