"""Telling an owner workflow (a pipeline, a scheduled run) that an object it made has ended."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from skyshift.contract.names import SIG_CHILD_ENDED
    from skyshift.contract.pipelines import ChildEnded


async def tell_owner(owner: str, name: str, phase: str) -> None:
    """Signal ``owner`` (a workflow id; nothing when empty). An owner that is gone (it ended,
    or never was) is not an error: owners also look for themselves every so often."""
    if not owner:
        return
    try:
        await workflow.get_external_workflow_handle(owner).signal(
            SIG_CHILD_ENDED, ChildEnded(name, phase)
        )
    except ApplicationError as err:
        workflow.logger.info("owner %s not told of %s: %s", owner, name, err)
