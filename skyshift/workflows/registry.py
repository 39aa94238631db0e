"""The workflow classes by Temporal workflow type: what the control worker registers.

:data:`LIFECYCLE_CLASSES` maps the workflow type of each kind with a lifecycle to its class, and
:func:`lifecycle_workflows` goes through the kinds of the one table of them
(:data:`skyshift.contract.lifecycles.LIFECYCLES`): a kind added there without its class here
stops the control worker at start, naming the kind, instead of leaving its objects with no
workflow to run them. :data:`HELPER_WORKFLOWS` are the control worker's workflows that no kind
owns: the scheduler, replica operations and a schedule's runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from skyshift.contract import names
from skyshift.contract.lifecycles import LIFECYCLES, Lifecycle
from skyshift.workflows.cluster import ClusterWorkflow
from skyshift.workflows.job import JobWorkflow
from skyshift.workflows.link import LinkWorkflow
from skyshift.workflows.ops import ReplicaOpWorkflow
from skyshift.workflows.pipeline import PipelineWorkflow
from skyshift.workflows.schedule import ScheduledRunWorkflow, ScheduleWorkflow
from skyshift.workflows.scheduler import SchedulerWorkflow
from skyshift.workflows.service import ServiceWorkflow

#: workflow type (``Lifecycle.workflow``) -> the class defined under that name
LIFECYCLE_CLASSES: dict[str, type] = {
    names.WF_CLUSTER: ClusterWorkflow,
    names.WF_JOB: JobWorkflow,
    names.WF_SERVICE: ServiceWorkflow,
    names.WF_SCHEDULE: ScheduleWorkflow,
    names.WF_LINK: LinkWorkflow,
    names.WF_PIPELINE: PipelineWorkflow,
}

#: the control worker's workflows that belong to no kind
HELPER_WORKFLOWS: tuple[type, ...] = (SchedulerWorkflow, ReplicaOpWorkflow, ScheduledRunWorkflow)


def lifecycle_workflows(table: Iterable[Lifecycle] = LIFECYCLES) -> list[type]:
    """The class of each kind's workflow, in the table's order; LookupError naming the kinds
    whose workflow type has no class here."""
    rows = list(table)
    missing = [f"{lc.kind} ({lc.workflow})" for lc in rows if lc.workflow not in LIFECYCLE_CLASSES]
    if missing:
        raise LookupError(
            "no workflow class registered in skyshift/workflows/registry.py for "
            + ", ".join(missing)
        )
    return [LIFECYCLE_CLASSES[lc.workflow] for lc in rows]


def control_workflows() -> list[type]:
    """Every workflow the control worker runs: each lifecycle's, then the helpers."""
    return [*lifecycle_workflows(), *HELPER_WORKFLOWS]
