"""Schedule: Jobs or Pipelines created on a cron or an interval, backed by a Temporal Schedule.

Its lifecycle is the ScheduleWorkflow (``schedule/<ns>/<name>``), which keeps the Temporal
Schedule of the same id in line with the spec. Each run is a ScheduledRunWorkflow that creates
``<schedule>-<YYYYMMDD-HHMMSS>`` (the scheduled time, UTC) from the template and waits for it
to end, so Temporal's overlap policy applies to the runs: ``Skip`` (default) skips a run while
the previous one is still going, ``BufferOne``/``BufferAll`` queue them, ``CancelOther`` stops
the previous run (its Job is deleted, its Pipeline cancelled), ``AllowAll`` runs them side by
side, at most ``maxActiveRuns`` at once. ``suspend: true`` pauses it (``skyctl pause/resume
schedule``). The newest ``historyLimit`` finished runs are kept; older ones are deleted.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.job import JobSpec
from skyshift.models.meta import StrictModel, validate_labels
from skyshift.models.pipeline import PipelineSpec, check_step_names

OverlapPolicy = Literal["Skip", "BufferOne", "BufferAll", "CancelOther", "AllowAll"]
SchedulePhase = Literal["Pending", "Active", "Paused", "Failed", "Deleting"]
#: the user whose rights a schedule's runs use: set by the API (with auth on) to whoever created
#: or last replaced the schedule; each run checks that user still exists and may create its
#: objects, and is skipped otherwise
OWNER_USER_ANNOTATION = "skyshift.io/schedule-owner"
#: "-YYYYMMDD-HHMMSS" appended to the schedule's name for each run's object
RUN_SUFFIX = 16
_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_FIELD = re.compile(r"^[0-9A-Za-z*,/?\-#LW]+$")
_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str) -> int:
    """``30s``, ``5m``, ``2h``, ``1d`` -> seconds."""
    m = _DURATION.fullmatch(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not a duration: use a number with s, m, h or d (5m)")
    return int(m.group(1)) * _UNIT[m.group(2)]


#: (field name, lowest, highest) of the five cron fields
_RANGES = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))


def _check_numbers(field: str, what: str, low: int, high: int) -> None:
    for part in field.split(","):
        base, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            raise ValueError(f"{what} step {step!r} must be a positive number")
        for number in base.split("-"):
            if number.isdigit() and not low <= int(number) <= high:
                raise ValueError(f"{what} {number} is out of range {low}-{high}")


def validate_cron(value: str) -> str:
    text = value.strip()
    if text in _MACROS:
        return text
    fields = text.split()
    if len(fields) != 5 or not all(_FIELD.fullmatch(f) for f in fields):
        raise ValueError(
            f"cron {value!r}: expected 5 fields (minute hour day-of-month month day-of-week, "
            f"e.g. '0 2 * * *') or one of {', '.join(sorted(_MACROS))}"
        )
    for field, (what, low, high) in zip(fields, _RANGES, strict=True):
        try:
            _check_numbers(field, what, low, high)
        except ValueError as err:
            raise ValueError(f"cron {value!r}: {err}") from None
    return text


class TemplateMeta(StrictModel):
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return validate_labels(v)


class JobTemplateSpec(StrictModel):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: JobSpec


class PipelineTemplateSpec(StrictModel):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PipelineSpec


class ScheduleSpec(StrictModel):
    cron: str = ""
    interval: str = ""
    timezone: str = "UTC"
    suspend: bool = False
    overlapPolicy: OverlapPolicy = "Skip"
    catchupWindow: str = "5m"
    historyLimit: int = Field(default=10, ge=1, le=100)
    #: Runs of this schedule unfinished at once; a run due beyond it is skipped and says so
    #: (bounds AllowAll and backfills; Skip and CancelOther keep one anyway)
    maxActiveRuns: int = Field(default=5, ge=1, le=50)
    jobTemplate: JobTemplateSpec | None = None
    pipelineTemplate: PipelineTemplateSpec | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return validate_cron(v) if v else v

    @field_validator("interval", "catchupWindow")
    @classmethod
    def _duration(cls, v: str) -> str:
        if v and parse_duration(v) < 1:
            raise ValueError("must be at least 1s")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {v!r} (an IANA name such as Europe/Paris)"
            ) from None
        return v

    @model_validator(mode="after")
    def _one_of(self) -> ScheduleSpec:
        if bool(self.cron) == bool(self.interval):
            raise ValueError("set exactly one of cron ('0 2 * * *') and interval ('10m')")
        if (self.jobTemplate is None) == (self.pipelineTemplate is None):
            raise ValueError("set exactly one of jobTemplate and pipelineTemplate")
        return self

    @property
    def target_kind(self) -> str:
        return "Job" if self.jobTemplate is not None else "Pipeline"


class ScheduleStatus(StrictModel):
    phase: SchedulePhase = "Pending"
    message: str = ""
    lastScheduleTime: str | None = None
    lastRun: str = ""
    runs: int = 0
    nextRunTimes: list[str] = Field(default_factory=list)
    observedGeneration: int = 0
    workflowId: str = ""


class Schedule(SkyObject):
    KIND: ClassVar[str] = "Schedule"
    PLURAL: ClassVar[str] = "schedules"
    NAMESPACED: ClassVar[bool] = True
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Schedule"] = "Schedule"
    spec: ScheduleSpec
    status: ScheduleStatus = Field(default_factory=ScheduleStatus)

    @model_validator(mode="after")
    def _names(self) -> Schedule:
        name = self.metadata.name
        if len(name) + RUN_SUFFIX > 63:
            raise ValueError(
                f"metadata.name: at most {63 - RUN_SUFFIX} characters for a schedule (each "
                f"run is named <schedule>-YYYYMMDD-HHMMSS, at most 63)"
            )
        if self.spec.pipelineTemplate is not None:
            run = f"{name}-{'0' * (RUN_SUFFIX - 1)}"
            check_step_names(run, self.spec.pipelineTemplate.spec, "metadata.name")
        return self
