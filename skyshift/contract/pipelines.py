"""Payloads and labels of the Pipeline and Schedule lifecycles (rules: :mod:`skyshift.contract`).

A step's Job (or a scheduled run's Job/Pipeline) carries its owner's workflow id in the
``skyshift.io/owner-workflow`` annotation; when it ends, its lifecycle sends that workflow the
``child_ended`` signal, which only means "look now": the owner reads the truth from etcd. The
owner also looks every ``config.poll`` seconds, so a lost signal or a Job deleted by hand is
noticed without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OWNER_ANNOTATION = "skyshift.io/owner-workflow"
OWNER_UID_ANNOTATION = "skyshift.io/owner-uid"
PIPELINE_LABEL = "skyshift.io/pipeline"
STEP_LABEL = "skyshift.io/pipeline-step"
SCHEDULE_LABEL = "skyshift.io/schedule"
SCHEDULED_TIME_ANNOTATION = "skyshift.io/scheduled-time"

STEP_TERMINAL = ("Succeeded", "Failed", "Skipped", "Cancelled")
PIPELINE_TERMINAL = ("Succeeded", "Failed", "Cancelled")


def schedule_run_prefix(namespace: str, name: str) -> str:
    """Temporal appends the scheduled time to this for each run's workflow id."""
    return f"scheduled/{namespace}/{name}"


@dataclass
class ChildEnded:
    name: str = ""
    phase: str = ""


@dataclass
class StepDef:
    name: str
    depends_on: list[str] = field(default_factory=list)
    retries: int = 0
    on_failure: str = "Fail"  # Fail | SkipDownstream | Continue


@dataclass
class StepState:
    phase: str = "Pending"
    job: str = ""
    job_uid: str = ""
    attempts: int = 0
    message: str = ""
    started: str = ""
    finished: str = ""


@dataclass
class PipelineConfig:
    poll: float = 60.0  # seconds between looks at the steps' jobs without a signal
    history_limit: int = 10_000


@dataclass
class PipelineState:
    phase: str = "Pending"
    message: str = ""
    steps: dict[str, StepState] = field(default_factory=dict)
    cancel: bool = False
    deleting: bool = False


@dataclass
class PipelineInput:
    namespace: str
    name: str
    uid: str
    steps: list[StepDef] = field(default_factory=list)
    phase: str = "Pending"
    cancel: bool = False
    deleting: bool = False
    invalid: str = ""
    owner: str = ""  # workflow to tell when the pipeline ends (a scheduled run)
    state: PipelineState | None = None
    config: PipelineConfig = field(default_factory=PipelineConfig)


@dataclass
class StartStepInput:
    namespace: str
    pipeline: str
    uid: str
    step: str
    attempt: int
    owner: str  # the pipeline's workflow id


@dataclass
class StartStepResult:
    job: str = ""
    job_uid: str = ""
    error: str = ""  # the step cannot start (its job name is taken by another object...)


@dataclass
class ReadJobsInput:
    namespace: str
    jobs: dict[str, str] = field(default_factory=dict)  # name -> uid


@dataclass
class JobEnd:
    phase: str = ""  # "" while running; "Gone" when the job (with that uid) no longer exists
    message: str = ""


@dataclass
class ReadJobsResult:
    jobs: dict[str, JobEnd] = field(default_factory=dict)


@dataclass
class DeleteOwnedInput:
    namespace: str
    owner_uid: str
    label: str  # label key naming the owner (pipeline or schedule)
    owner: str  # its value
    only: list[str] = field(default_factory=list)  # just these names (all when empty)
    keep: int = -1  # schedules: keep the newest ``keep`` finished objects (-1: delete all)
    plural: str = "jobs"


@dataclass
class PipelineStatusPatch:
    namespace: str
    name: str
    uid: str
    phase: str = ""
    message: str = ""
    steps: dict[str, StepState] = field(default_factory=dict)
    workflow_id: str = ""
    started: bool = False
    finished: bool = False


@dataclass
class ReadPipelineInput:
    namespace: str
    name: str
    uid: str


@dataclass
class ReadPipelineResult:
    found: bool = False
    deleting: bool = False
    cancel: bool = False


# ---- schedules -------------------------------------------------------------------------------


@dataclass
class ScheduleInput:
    namespace: str
    name: str
    uid: str
    deleting: bool = False
    history_limit: int = 10_000


@dataclass
class ScheduleRef:
    namespace: str
    name: str
    uid: str


@dataclass
class SyncScheduleResult:
    found: bool = False
    deleting: bool = False


@dataclass
class RunInput:
    """A ScheduledRunWorkflow's input (the Temporal Schedule's action argument)."""

    namespace: str
    schedule: str
    uid: str
    poll: float = 60.0
    ref: RunRef | None = None  # set on continue-as-new: the run's object
    history_limit: int = 10_000


@dataclass
class StartRunInput:
    namespace: str
    schedule: str
    uid: str
    scheduled: str  # RFC 3339 UTC: the run's time, which names its object
    owner: str  # the run's workflow id


@dataclass
class RunRef:
    kind: str = ""  # "Job" | "Pipeline"; "" when the schedule is gone (nothing created)
    name: str = ""
    uid: str = ""
    message: str = ""


@dataclass
class ReadRunResult:
    phase: str = ""  # "" while running, "Gone" when deleted
    message: str = ""


@dataclass
class ScheduleRunLook:
    namespace: str
    kind: str
    name: str
    uid: str
