"""Every name SkyShift's processes agree on through Temporal: task queues, workflow ids and
types, signals, queries and search attributes (activity names: :mod:`.activity_names`; the
kinds with a lifecycle, their workflow types and id schemes: :mod:`.lifecycles`).

A name here is part of recorded histories and of running workflows: renaming one breaks them.
Identifiers are readable (docs/architecture.md): ``job/<ns>/<name>``, ``cluster/<name>``,
``scheduler``; the object's uid travels in the memo and in every payload that acts on an object,
so a workflow never acts on a newer object that reuses the name.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

from skyshift.contract import lifecycles

# ---- task queues ----------------------------------------------------------------------------

CONTROL_QUEUE = "skyshift-control"


def skylet_queue(cluster: str) -> str:
    return f"skylet-{cluster}"


# ---- workflow types and ids -----------------------------------------------------------------

WF_JOB = lifecycles.JOB.workflow
WF_CLUSTER = lifecycles.CLUSTER.workflow
WF_SCHEDULER = "SchedulerWorkflow"
WF_SERVICE = lifecycles.SERVICE.workflow
WF_LINK = lifecycles.LINK.workflow
WF_PIPELINE = lifecycles.PIPELINE.workflow
WF_SCHEDULE = lifecycles.SCHEDULE.workflow
WF_SCHEDULED_RUN = "ScheduledRunWorkflow"
WF_REPLICA_OP = "ReplicaOpWorkflow"

SCHEDULER_ID = "scheduler"

# the id of each lifecycle's workflow (the scheme is :meth:`.lifecycles.Lifecycle.workflow_id`)


def job_workflow_id(namespace: str, name: str) -> str:
    return lifecycles.JOB.workflow_id(namespace, name)


def cluster_workflow_id(name: str) -> str:
    return lifecycles.CLUSTER.workflow_id(None, name)


def service_workflow_id(namespace: str, name: str) -> str:
    return lifecycles.SERVICE.workflow_id(namespace, name)


def link_workflow_id(name: str) -> str:
    return lifecycles.LINK.workflow_id(None, name)


def pipeline_workflow_id(namespace: str, name: str) -> str:
    return lifecycles.PIPELINE.workflow_id(namespace, name)


def schedule_workflow_id(namespace: str, name: str) -> str:
    """Both the ScheduleWorkflow's id and the Temporal Schedule's (they do not collide)."""
    return lifecycles.SCHEDULE.workflow_id(namespace, name)


# ---- signals (one payload dataclass each, named in the comment) and queries -----------------

SIG_PLACED = "placed"  # scheduler -> job: Placement
SIG_REPLICAS = "replicas_changed"  # skylet -> job: ReplicaReport
SIG_CLUSTER = "cluster_event"  # skylet / cluster -> job: ClusterEvent
SIG_SPEC = "spec_changed"  # API -> job / cluster: SpecChanged
SIG_DELETE = "delete"  # API -> job / cluster: DeleteRequest
SIG_ENSURE = "ensure"  # reconciler -> job: JobInput (a newer object reusing the name)
SIG_ENQUEUE = "enqueue"  # job -> scheduler: EnqueueRequest
SIG_ENQUEUE_MANY = "enqueue_many"  # starters -> scheduler: EnqueueBatch (requests sent together)
SIG_DEQUEUE = "dequeue"  # job -> scheduler: DequeueRequest
SIG_CAPACITY = "capacity"  # skylet -> scheduler: CapacityChanged
SIG_RULES = "rules_changed"  # control worker -> scheduler: RulesChanged
SIG_SCALE = "scale"  # scheduler -> cluster: ScaleRequest
SIG_REFRESH = "refresh"  # anyone -> service: look at the matching jobs now (Refresh)
SIG_CHILD_ENDED = "child_ended"  # job / pipeline -> owner workflow: ChildEnded
SIG_REQUEUE = "requeue"  # control worker -> job: ask the scheduler again (Requeue)

QUERY_STATE = "state"  # -> job / service / scheduler / pipeline: its state dataclass
QUERY_PHASE = "phase"  # -> cluster: its phase (str)
QUERY_DEPTH = "depth"  # metrics -> scheduler: how many jobs are queued (int)
QUERY_QUEUE = "queue"  # control worker -> scheduler: QueueView (its run chain, queued keys)

# ---- search attributes of every SkyShift workflow (registered by the dev stack and `up`) ----

KIND = SearchAttributeKey.for_keyword("SkyShiftKind")
NAMESPACE = SearchAttributeKey.for_keyword("SkyShiftNamespace")
PHASE = SearchAttributeKey.for_keyword("SkyShiftPhase")
CLUSTER = SearchAttributeKey.for_keyword("SkyShiftCluster")
#: the attribute a lifecycle's ``scope`` names (:attr:`.lifecycles.Lifecycle.scope`)
SCOPE = {"namespace": NAMESPACE, "cluster": CLUSTER}
SEARCH_ATTRIBUTES = (KIND, NAMESPACE, PHASE, CLUSTER)


def order_prefix(uid: str) -> str:
    """What the names of the submit orders of the job with ``uid`` start with."""
    return f"o-{uid.replace('-', '').lower()}-"


def order_name(uid: str, n: int) -> str:
    """The ``n``-th submit order of the job with ``uid`` (unique; a DNS label like every
    name; see activities.orders)."""
    return f"{order_prefix(uid)}{n}"
