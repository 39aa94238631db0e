"""Payloads of the Job, Cluster and Scheduler lifecycles and of the skylet's activities
(the rules are in :mod:`skyshift.contract`)."""

from dataclasses import dataclass, field
from typing import Any

from skyshift.compat.types import ReplicaSpec
from skyshift.contract.provision import ProvisionState
from skyshift.models.quantity import Resources
from skyshift.scheduler.types import Filter, JobRequest, Preference

# replica states as the job workflow tracks them (compat states plus two of its own)
PENDING, RUNNING, UNKNOWN = "Pending", "Running", "Unknown"
SUCCEEDED, FAILED = "Succeeded", "Failed"
UNPLACED = "Unplaced"  # waiting for the scheduler
RESTARTING = "Restarting"  # waiting for the restart backoff to pass


def uid8(uid: str) -> str:
    return uid.replace("-", "")[:8].lower()


def replica_name(job: str, uid: str, rank: int) -> str:
    """The deterministic replica name ``<job>-<uid8>-<rank>``: the idempotency key of submit."""
    return f"{job}-{uid8(uid)}-{rank}"


# ---- jobs -----------------------------------------------------------------------------------


@dataclass
class JobTemplate:
    """What a job's replicas look like: the parts of the Job spec the lifecycle needs."""

    image: str = ""
    run: str = ""
    envs: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    resources: Resources = field(default_factory=Resources)
    replicas: int = 1
    restart_policy: str = "OnFailure"
    max_restarts: int = 3
    priority: int = 0
    filters: list[Filter] = field(default_factory=list)
    preferences: list[Preference] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    preemption_policy: str = "PreemptLowerPriority"


# Revisions of the job lifecycle that change what a workflow does (JobInput.revision):
# 1: the search attributes of a workflow task that started a submit wait for its result.
# 2: replicas are started by a submit order the workflow writes to etcd with a local activity
#    (``SubmitOrder``), which the cluster's skylet carries out, instead of a submit activity on
#    the skylet's task queue (3 events and a workflow task of 3 for its result, per submit); and
#    the wait for a placement has no ``requeue_after`` timer (2 events): the control worker's
#    requeue sweep (workers/requeue.py) tells a job whose request the scheduler lost.
LATE_VISIBILITY = 1
SUBMIT_ORDERS = 2
REVISION = SUBMIT_ORDERS  # what new lifecycles get


@dataclass
class JobConfig:
    """Timings of a job lifecycle (tests shorten them)."""

    backoff_base: float = 1.0  # first restart waits this long, doubling per restart
    backoff_max: float = 60.0
    history_limit: int = 2000  # continue-as-new past this many events (or when suggested)
    # re-enqueue at the scheduler if no placement came by then (revisions before SUBMIT_ORDERS;
    # later ones wait without a timer and are told by the control worker's requeue sweep)
    requeue_after: float = 600.0
    teardown_timeout: float = 60.0  # per cluster; a cluster that is away is cleaned on return


@dataclass
class ReplicaRecord:
    """One rank of a job as its workflow knows it."""

    rank: int
    cluster: str = ""  # "" while unplaced
    attempt: int = 0
    state: str = UNPLACED
    exit_code: int | None = None
    message: str = ""
    restart_at: float = 0.0  # epoch seconds when RESTARTING
    submitted: bool = False  # handed to the cluster (for this cluster and attempt)


@dataclass
class JobState:
    """Everything a JobWorkflow carries over continue-as-new."""

    phase: str = "Pending"
    message: str = ""
    generation: int = 0
    seq: int = 0  # placement request counter
    awaiting: int = 0  # seq of the outstanding placement request (0: none)
    requested_at: float = 0.0
    replicas: list[ReplicaRecord] = field(default_factory=list)
    restarts: int = 0
    leftovers: dict[str, list[str]] = field(default_factory=dict)  # cluster -> stale names
    deleting: bool = False
    started: bool = False
    # submit orders (revision SUBMIT_ORDERS): how many were written, and per cluster how many
    # since its orders were last withdrawn
    ordered: int = 0
    orders: dict[str, int] = field(default_factory=dict)


@dataclass
class JobInput:
    namespace: str
    name: str
    uid: str
    generation: int = 0
    created: float = 0.0
    template: JobTemplate | None = None
    invalid: str = ""  # why the spec cannot run (the job ends Failed with this message)
    phase: str = "Pending"  # status.phase when the workflow was (re)started
    clusters: list[str] = field(default_factory=list)  # clusters in status, for teardown
    deleting: bool = False
    state: JobState | None = None  # set on continue-as-new
    config: JobConfig = field(default_factory=JobConfig)
    owner: str = ""  # workflow told when the job ends (a pipeline step's, a scheduled run's)
    # The lifecycle behaviour this run was started with (see REVISION). It travels in the
    # workflow's input, so a replay of an older run behaves as that run did, without the
    # marker (and TemporalChangeVersion visibility update) ``workflow.patched`` costs per job.
    revision: int = 0
    # The starter sent this run's first placement request (sequence number 1) beside its start,
    # which it delayed until the scheduler's answer: the workflow does not enqueue itself for it
    # (:mod:`skyshift.contract.enqueue`). Set only by a start that sent the request.
    enqueued: bool = False


@dataclass
class Placement:
    seq: int
    assignments: dict[str, int] = field(default_factory=dict)
    message: str = ""


@dataclass
class ReplicaUpdate:
    name: str
    rank: int
    attempt: int
    state: str
    exit_code: int | None = None
    reason: str = ""
    message: str = ""


def all_succeeded_message(replicas: int) -> str:
    """A job's final message when every replica succeeded: the workflow's verdict
    (``workflows.jobstate.verdict``) and the skylet that writes it first
    (``lifecycle.convert.merge_counts``) word it the same."""
    return f"all {replicas} replicas succeeded"


@dataclass
class ReplicaReport:
    cluster: str
    updates: list[ReplicaUpdate] = field(default_factory=list)
    # the skylet wrote the job Succeeded with these counts (every replica counted Succeeded):
    # the workflow that reaches the same verdict does not write it again
    finished: bool = False


@dataclass
class ClusterEvent:
    cluster: str
    kind: str  # "lost" | "recovered" | "deleted" | DRIFT | PREEMPTED | REJECTED
    message: str = ""


# ClusterEvent kind: a skylet found replicas the job's workflow holds on its cluster while etcd's
# stored placement does not name it; the workflow writes its placement back
DRIFT = "drift"
# ClusterEvent kind: a higher-priority job needs this job's capacity (``cluster`` is empty,
# ``message`` says who and why): every replica is deleted and the job goes back to Pending
PREEMPTED = "preempted"
# ClusterEvent kind: the cluster refused a submit order for good (``message`` says why): the job
# fails, as it did when a submit activity failed with a non-retryable error
REJECTED = "rejected"


@dataclass
class SpecChanged:
    generation: int = 0


@dataclass
class DeleteRequest:
    uid: str = ""


# ---- scheduler ------------------------------------------------------------------------------


@dataclass
class EnqueueRequest:
    workflow_id: str
    seq: int
    request: JobRequest
    current: dict[str, int] = field(default_factory=dict)  # replicas already placed elsewhere


@dataclass
class EnqueueBatch:
    """Requests sent in one signal: those that came while the one before was on its way
    (``lifecycle.enqueue.Batcher``)."""

    requests: list[EnqueueRequest] = field(default_factory=list)


@dataclass
class DequeueRequest:
    key: str
    uid: str = ""


@dataclass
class CapacityChanged:
    cluster: str
    seen_uids: list[str] = field(default_factory=list)  # jobs whose replicas it now accounts
    freed: bool = False  # capacity went up (or the cluster became Ready)
    # how many replicas of each seen job appeared since the last report; a job's replicas may
    # show up over several rounds, and only that many of its reserved ones are accounted yet
    # (empty, from older skylets: every reservation of the seen jobs is accounted)
    seen_counts: dict[str, int] = field(default_factory=dict)


@dataclass
class RulesChanged:
    """A FilterPolicy or a cluster's labels changed: every queued job is worth another try."""

    what: str = ""  # e.g. "FilterPolicy default/gpu-only", for the log


@dataclass
class Reservation:
    """Capacity the scheduler handed out that the cluster's allocatable may not show yet."""

    uid: str
    key: str
    cluster: str
    per_replica: Resources
    count: int
    placed_at: float
    # a round left some job pending while subtracting this reservation; the cluster may already
    # have shown it in its allocatable then (counted twice), so releasing it is worth a retry
    pending_behind: bool = False


@dataclass
class QueueEntry:
    req: EnqueueRequest
    tried_epoch: int = -1
    last_message: str = ""
    not_before: float = 0.0  # epoch seconds; set after a failed delivery
    # a round's placement may have been recorded (etcd) or even delivered although the round
    # reported it undelivered: the next round looks for the recorded decision first
    undelivered: bool = False
    # the jobs a round evicted for this one, and until when (epoch seconds) it waits for
    # their capacity instead of evicting more (skyshift.activities.preemption)
    nominated: list[str] = field(default_factory=list)
    nominated_until: float = 0.0
    waits_on: list[str] = field(default_factory=list)  # the clusters those victims ran on


@dataclass
class SchedulerConfig:
    max_batch: int = 256
    reservation_ttl: float = 30.0
    history_limit: int = 5000


@dataclass
class SchedulerState:
    queue: list[QueueEntry] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    epoch: int = 0


@dataclass
class QueueView:
    """What the scheduler holds: the first run of its continue-as-new chain (another one means
    it was replaced, and with it the queue) and the keys (``<ns>/<name>``) of the queued jobs."""

    run: str
    keys: list[str] = field(default_factory=list)


@dataclass
class Requeue:
    """The scheduler does not hold this job's placement request: send it again."""

    reason: str = ""


@dataclass
class SchedulerInput:
    state: SchedulerState | None = None
    config: SchedulerConfig = field(default_factory=SchedulerConfig)


@dataclass
class PlaceBatchInput:
    jobs: list[QueueEntry]
    reservations: list[Reservation] = field(default_factory=list)


@dataclass
class PlaceOutcome:
    key: str
    uid: str
    seq: int
    status: str  # "placed" | "pending" | "gone" | "undelivered"
    assignments: dict[str, int] = field(default_factory=dict)
    message: str = ""
    victims: list[str] = field(default_factory=list)  # evicted for it this round
    nominated_until: float = 0.0
    waits_on: list[str] = field(default_factory=list)  # the clusters the victims ran on


@dataclass
class PlaceBatchResult:
    outcomes: list[PlaceOutcome] = field(default_factory=list)


# ---- store ----------------------------------------------------------------------------------


@dataclass
class JobStatusPatch:
    """Status fields to set on a Job (None: leave as is). Applied only if the uid matches."""

    namespace: str
    name: str
    uid: str
    phase: str | None = None
    message: str | None = None
    placement: dict[str, int] | None = None
    replica_status: dict[str, dict[str, int]] | None = None
    restarts: int | None = None
    observed_generation: int | None = None
    finished: bool = False  # set completionTime
    started: bool = False  # set startTime if unset
    workflow_id: str | None = None
    preempted: str | None = None  # set the Preempted condition with this message


@dataclass
class ReadJobInput:
    namespace: str
    name: str
    uid: str


@dataclass
class ReadSpecResult:
    """An object read back for its lifecycle: found (still the same uid), the generation of its
    spec, the template parsed from it or why it is invalid, and whether it is being deleted.
    Each kind narrows ``template`` to its own type (the field keeps its place)."""

    found: bool
    generation: int = 0
    template: Any = None
    invalid: str = ""
    deleting: bool = False


@dataclass
class ReadJobResult(ReadSpecResult):
    template: JobTemplate | None = None


@dataclass
class RemoveObjectInput:
    plural: str
    name: str
    uid: str
    namespace: str | None = None


@dataclass
class ClusterStatusPatch:
    name: str
    uid: str
    phase: str
    message: str = ""


@dataclass
class ClusterJobsInput:
    cluster: str
    event: ClusterEvent
    skip: list[str] = field(default_factory=list)  # workflow ids already told


# ---- clusters (skylet task queues) ----------------------------------------------------------


@dataclass
class JobRef:
    namespace: str
    name: str
    uid: str


@dataclass
class SubmitInput:
    job: JobRef
    cluster: str
    replicas: list[ReplicaSpec]


@dataclass
class SubmitOrder:
    """A submit for the skylet of ``submit.cluster`` to carry out, stored in etcd under
    ``submitorders/<cluster>/<name>`` until it is done (or withdrawn by its workflow)."""

    name: str  # names.order_name: o-<job uid>-<n>, n counting the job's orders
    submit: SubmitInput


@dataclass
class WithdrawOrders:
    """Remove every order of one job on one cluster (those carried out already are gone)."""

    cluster: str
    job_uid: str


@dataclass
class SubmitResult:
    updates: list[ReplicaUpdate] = field(default_factory=list)


@dataclass
class DeleteReplicasInput:
    cluster: str
    job_uid: str = ""
    names: list[str] = field(default_factory=list)  # empty: every replica of job_uid


@dataclass
class DeleteReplicasResult:
    deleted: list[str] = field(default_factory=list)


@dataclass
class ClusterInput:
    name: str
    uid: str
    phase: str = "Init"
    deleting: bool = False
    lost_jobs: list[str] = field(default_factory=list)  # job workflow ids told "lost"
    heartbeat_timeout: float = 5.0
    sync_duration: float = 300.0  # one sync activity runs this long, then returns
    history_limit: int = 1000
    provision: ProvisionState | None = None  # a provisioned cluster: its plan and progress


@dataclass
class SyncInput:
    cluster: str
    uid: str
    phase: str = "Init"
    lost_jobs: list[str] = field(default_factory=list)
    max_duration: float = 300.0


@dataclass
class SyncResult:
    phase: str
    message: str = ""
    lost_jobs: list[str] = field(default_factory=list)
    permanent: bool = False


@dataclass
class TeardownInput:
    cluster: str


@dataclass
class TeardownResult:
    jobs: list[str] = field(default_factory=list)  # workflow ids told "deleted"
    deleted: int = 0
    message: str = ""


#: TeardownResult.message starts with this when the teardown gave up on an unreachable cluster
UNREACHABLE = "unreachable"


# ---- logs and exec --------------------------------------------------------------------------


@dataclass
class ReplicaOpInput:
    op: str  # "logs" | "exec"
    clusters: list[str]
    names: list[str]
    tail: int | None = None
    command: list[str] = field(default_factory=list)
    timeout: float = 60.0


@dataclass
class ReplicaOpResult:
    found: dict[str, str] = field(default_factory=dict)  # name -> log text (logs)
    exit_code: int | None = None  # exec
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # "NotFound: ..." / "Unsupported: ..." / "Transient: ..."
