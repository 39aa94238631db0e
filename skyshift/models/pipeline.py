"""Pipeline: a DAG of job templates run once, each step when the steps it depends on succeeded.

Its lifecycle is the PipelineWorkflow (``pipeline/<ns>/<name>``): it creates one Job per step
attempt, named ``<pipeline>-<step>`` (``-<n>`` from the second attempt on), and follows them.

* ``parameters``: string values substituted for ``{{ params.NAME }}`` in each step's job
  template (any string in it: run, image, envs...) before the template is validated as a Job
  spec, so a wrong value is an error naming the step and the field.
* ``retries``: how many times a failed step's job is run again (a new Job each time; the failed
  ones are kept for their logs).
* ``onFailure`` of a step that failed for good: ``Fail`` (default) stops the pipeline (running
  steps are cancelled, steps not started are skipped, phase Failed); ``SkipDownstream`` skips
  the steps that depend on it, lets the others run, and the pipeline ends Failed;
  ``Continue`` treats it as done: the steps after it run, and the pipeline can still succeed.
* ``cancel: true`` (``skyctl cancel pipeline``): running steps' jobs are deleted, the rest are
  Cancelled, phase Cancelled. Steps are fixed once created: a change to them is refused.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from skyshift.models.base import SkyObject
from skyshift.models.meta import StrictModel, validate_name
from skyshift.models.params import ParamName, render_template

StepPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Skipped", "Cancelled"]
PipelinePhase = Literal["Pending", "Running", "Succeeded", "Failed", "Cancelled", "Deleting"]
OnFailure = Literal["Fail", "SkipDownstream", "Continue"]
MAX_STEPS = 100
MAX_RETRIES = 20
#: what a step's Job name adds to the pipeline's: "-" + step + "-" + up to two digits
ATTEMPT_SUFFIX = 3


class PipelineStep(StrictModel):
    name: str
    dependsOn: list[str] = Field(default_factory=list, max_length=MAX_STEPS)
    job: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    retries: int = Field(default=0, ge=0, le=MAX_RETRIES)
    onFailure: OnFailure = "Fail"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return validate_name(v, "step name")


class PipelineSpec(StrictModel):
    parameters: dict[ParamName, str] = Field(default_factory=dict)
    steps: list[PipelineStep] = Field(min_length=1, max_length=MAX_STEPS)
    cancel: bool = False

    @model_validator(mode="after")
    def _dag(self) -> PipelineSpec:
        names = [s.name for s in self.steps]
        seen: set[str] = set()
        for i, step in enumerate(self.steps):
            if step.name in seen:
                raise ValueError(f"steps[{i}].name: step {step.name!r} appears twice")
            seen.add(step.name)
        for i, step in enumerate(self.steps):
            for dep in step.dependsOn:
                if dep == step.name:
                    raise ValueError(f"steps[{i}].dependsOn: step {dep!r} depends on itself")
                if dep not in seen:
                    raise ValueError(
                        f"steps[{i}].dependsOn: no step named {dep!r} (steps: {', '.join(names)})"
                    )
        cycle = find_cycle({s.name: list(s.dependsOn) for s in self.steps})
        if cycle:
            raise ValueError(f"steps: the dependencies form a cycle: {' -> '.join(cycle)}")
        for i, step in enumerate(self.steps):
            render_template(step.job, self.parameters, f"steps[{i}].job")
        return self


def find_cycle(deps: dict[str, list[str]]) -> list[str]:
    """A dependency cycle as its step names (first one repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for dep in deps.get(node, []):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in deps:  # at most MAX_STEPS deep: recursion is bounded
        if node not in state and (found := visit(node)):
            return found
    return []


def topological(steps: list[PipelineStep]) -> list[PipelineStep]:
    """Steps ordered so each comes after what it depends on (ties keep the spec's order)."""
    done: set[str] = set()
    out: list[PipelineStep] = []
    left = list(steps)
    while left:
        ready = [s for s in left if all(d in done for d in s.dependsOn)]
        if not ready:  # a cycle: validation refuses it, keep the rest in spec order
            return out + left
        for s in ready:
            done.add(s.name)
            out.append(s)
        left = [s for s in left if s.name not in done]
    return out


class StepStatus(StrictModel):
    phase: StepPhase = "Pending"
    job: str = ""
    attempts: int = 0
    message: str = ""
    startTime: str | None = None
    completionTime: str | None = None


class PipelineStatus(StrictModel):
    phase: PipelinePhase = "Pending"
    message: str = ""
    steps: dict[str, StepStatus] = Field(default_factory=dict)
    startTime: str | None = None
    completionTime: str | None = None
    workflowId: str = ""


class Pipeline(SkyObject):
    KIND: ClassVar[str] = "Pipeline"
    PLURAL: ClassVar[str] = "pipelines"
    NAMESPACED: ClassVar[bool] = True
    HAS_LIFECYCLE: ClassVar[bool] = True

    kind: Literal["Pipeline"] = "Pipeline"
    spec: PipelineSpec
    status: PipelineStatus = Field(default_factory=PipelineStatus)

    @model_validator(mode="after")
    def _job_names(self) -> Pipeline:
        check_step_names(self.metadata.name, self.spec, "metadata.name")
        return self


def step_job_name(pipeline: str, step: str, attempt: int) -> str:
    """The Job of a step's ``attempt`` (1-based)."""
    base = f"{pipeline}-{step}"
    return base if attempt <= 1 else f"{base}-{attempt}"


def check_step_names(pipeline: str, spec: PipelineSpec, where: str) -> None:
    """Every step's Job name (with its longest attempt suffix) must be a valid object name."""
    for step in spec.steps:
        longest = len(pipeline) + 1 + len(step.name) + ATTEMPT_SUFFIX
        if longest > 63:
            raise ValueError(
                f"{where}: pipeline {pipeline!r} with step {step.name!r} makes job names of up "
                f"to {longest} characters (at most 63): shorten one of them"
            )
