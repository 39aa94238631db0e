"""The kinds that have a lifecycle workflow, in one table: what starts, finds and shows them.

Each row says which workflow runs an object of the kind, under which id, how it is given its
input, which search attributes it starts with and in which phases it has ended by itself. The
starter (:mod:`skyshift.lifecycle.starter`), the control worker's reconciler and workflow list,
and the CLI read it instead of listing the kinds again. Pure data (no Temporal import), so the
CLI reads it without loading the SDK. Workflow names and ids are in recorded histories and
running workflows: never change one (:mod:`.names` re-exports them under their old names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from skyshift.contract.pipelines import PIPELINE_TERMINAL
from skyshift.models.job import TERMINAL_PHASES


@dataclass(frozen=True)
class Lifecycle:
    kind: str
    #: the Temporal workflow type
    workflow: str
    #: first part of the workflow id: ``<prefix>/<ns>/<name>`` (namespaced) or ``<prefix>/<name>``
    id_prefix: str
    namespaced: bool
    #: how the workflow is given its input: as the ``ensure`` signal (a newer object of the same
    #: name, a deletion) or as ``spec_changed`` / ``delete`` signals on its first input
    ensured: bool
    #: the search attribute with the object's name or namespace: SkyShiftNamespace or
    #: SkyShiftCluster (None: the kind only)
    scope: Literal["namespace", "cluster"] | None
    #: SkyShiftPhase at start (None: the workflow keeps no phase attribute)
    first_phase: str | None
    #: phases in which the workflow ended by itself: the reconciler leaves such objects alone
    #: unless they are being deleted (empty: the workflow runs as long as the object exists)
    ended: tuple[str, ...] = ()

    def workflow_id(self, namespace: str | None, name: str) -> str:
        """The id of the workflow of object ``name`` (``namespace`` ignored if cluster-scoped)."""
        if self.namespaced:
            return f"{self.id_prefix}/{namespace}/{name}"
        return f"{self.id_prefix}/{name}"

    def object_workflow_id(self, obj: Mapping[str, Any]) -> str:
        """The workflow id of a stored object of this kind (namespace "default" if unset)."""
        meta = obj.get("metadata") or {}
        return self.workflow_id(str(meta.get("namespace") or "default"), str(meta.get("name")))


JOB = Lifecycle("Job", "JobWorkflow", "job", True, True, "namespace", "Pending", TERMINAL_PHASES)
CLUSTER = Lifecycle("Cluster", "ClusterWorkflow", "cluster", False, False, "cluster", "Init")
SERVICE = Lifecycle("Service", "ServiceWorkflow", "service", True, True, "namespace", "Pending")
PIPELINE = Lifecycle("Pipeline", "PipelineWorkflow", "pipeline", True, True, "namespace",
                     "Pending", PIPELINE_TERMINAL)
LINK = Lifecycle("Link", "LinkWorkflow", "link", False, True, None, "Init")
#: the ScheduleWorkflow's id is also the id of the Temporal Schedule it keeps (they do not clash)
SCHEDULE = Lifecycle("Schedule", "ScheduleWorkflow", "schedule", True, True, "namespace", None)

#: every kind with a lifecycle, in the order the reconciler goes through them
LIFECYCLES: tuple[Lifecycle, ...] = (CLUSTER, JOB, SERVICE, SCHEDULE, LINK, PIPELINE)
BY_KIND: dict[str, Lifecycle] = {lc.kind: lc for lc in LIFECYCLES}


def lifecycle_of(kind: object) -> Lifecycle:
    """The lifecycle of ``kind``; ValueError if the kind has none."""
    lc = BY_KIND.get(str(kind))
    if lc is None:
        raise ValueError(f"{kind} has no lifecycle workflow")
    return lc
