"""Plain dataclasses the scheduler takes and returns.

The SchedulerWorkflow hands a batch of pending jobs plus a capacity snapshot to one activity,
which calls ``schedule_batch``; the decisions travel back as Temporal payloads. So these are plain
dataclasses (no pydantic, no methods that do I/O) that Temporal's default converter round-trips,
and every field added later must get a default so older payloads still decode.
"""

from dataclasses import dataclass, field

from skyshift.models.quantity import Resources


@dataclass
class NodeInfo:
    """One node of a cluster: what is still free on it (allocatable minus what runs there now)."""

    name: str
    free: Resources
    capacity: Resources | None = None  # all it has (None: unknown, taken to be ``free``)


@dataclass
class QueueInfo:
    """A batch cluster's own queue (Slurm): how much more may wait there, and how many wait.

    ``room`` is the cluster's bound on queued work minus the requests pending there now and
    the reservations not yet shown there; a replica may be placed in it when no node has it
    free, if it fits some node's capacity (Slurm starts it when a job ends)."""

    room: Resources
    jobs: int = 0  # jobs waiting in that queue (anyone's, plus SkyShift's reserved ones)


@dataclass
class ClusterInfo:
    """A cluster as the scheduler sees it: labels for filters, readiness, per-node free capacity."""

    name: str
    labels: dict[str, str]
    ready: bool
    nodes: list[NodeInfo]
    manager: str = ""
    queue: QueueInfo | None = None  # None: only free capacity is placed on


@dataclass
class Expression:
    """A label match expression.

    ``operator`` is ``In`` or ``NotIn`` (as in the original SkyShift); ``Exists`` and
    ``DoesNotExist`` are accepted too. Operators compare case-insensitively. ``NotIn`` holds for
    a cluster that lacks the key, as in Kubernetes.
    """

    key: str
    operator: str
    values: list[str] = field(default_factory=list)


@dataclass
class Filter:
    """A hard placement constraint: every label and every expression must hold."""

    name: str = ""
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: list[Expression] = field(default_factory=list)


@dataclass
class Preference:
    """A soft placement wish: clusters matching it gain ``weight`` (1..100) points."""

    name: str = ""
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: list[Expression] = field(default_factory=list)
    weight: int = 1


@dataclass
class FilterPolicyInfo:
    """A namespace's FilterPolicy: jobs it selects may only use ``include`` (when non-empty) and
    never ``exclude``. An empty ``label_selector`` selects every job in the namespace."""

    name: str
    namespace: str
    label_selector: dict[str, str] = field(default_factory=dict)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)


@dataclass
class JobRequest:
    """One job to place in this round: ``replicas`` copies of ``per_replica``, all or none."""

    key: str  # "namespace/name"
    uid: str
    namespace: str
    labels: dict[str, str]
    priority: int
    created: float  # epoch seconds; earlier goes first among equal priorities
    replicas: int
    per_replica: Resources
    filters: list[Filter] = field(default_factory=list)
    preferences: list[Preference] = field(default_factory=list)
    admitted: bool = False  # holds replicas already (a scale-up): no quota `jobs` charged
    # "PreemptLowerPriority": may evict lower-priority jobs to fit; "Never": only waits
    preemption: str = "PreemptLowerPriority"
    nominated: bool = False  # evicted jobs for the capacity now freeing: placed first
    # the clusters its victims ran on: while it waits (nominated), their free capacity, up to
    # what it asks for, is held for it and no job after it in the round gets that
    waits_on: list[str] = field(default_factory=list)


@dataclass
class Decision:
    """Where a job's replicas go, or why they go nowhere.

    ``assignments`` maps cluster -> replicas, in rank order (best cluster first); it is empty when
    the job was not placed. ``reasons`` maps each cluster that was not used, or could not take all
    replicas, to a human-readable why; ``message`` is a one-line summary for ``skyctl describe``.
    """

    key: str
    uid: str
    assignments: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    message: str = ""
    victims: list[str] = field(default_factory=list)  # jobs to evict for it ("ns/name")
    reclaimed: list[str] = field(default_factory=list)  # victims evicted as borrowers only
    waits_on: list[str] = field(default_factory=list)  # the clusters the victims ran on

    @property
    def placed(self) -> bool:
        return bool(self.assignments)
