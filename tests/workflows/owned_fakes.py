"""Same-name fakes of the activities of the Pipeline, Schedule, Link and provisioned Cluster
lifecycles (above the adapter boundary, as in :mod:`tests.workflows.fakes`): each records its
calls and answers from what the test set."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from skyshift.contract import activity_names as act
from skyshift.contract import pipelines as pl
from skyshift.contract.links import LinkRef, LinkStatusPatch, LinkView, ProbeInput, ProbeResult
from skyshift.contract.provision import (
    DownInput,
    LaunchInput,
    LaunchResult,
    UsageInput,
    UsageResult,
)
from tests.workflows.fakes import Fakes

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def fake(name: str) -> Callable[[F], F]:
    """The activity ``name``: records each call (method name, argument) in ``self.calls``."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def recorded(self: Fakes, arg: Any) -> Any:
            self.calls.append((fn.__name__, arg))
            return await fn(self, arg)

        return cast(F, activity.defn(name=name)(recorded))

    return wrap


def methods(obj: object, names: str) -> list[Callable[..., Any]]:
    """The bound methods ``names`` (space-separated) of ``obj``: a worker's activities."""
    return [getattr(obj, n) for n in names.split()]


@dataclass
class PipelineFakes(Fakes):
    ends: dict[str, pl.JobEnd] = field(default_factory=dict)  # job name -> how it ended
    step_errors: dict[str, str] = field(default_factory=dict)  # step -> why it cannot start
    stored: pl.ReadPipelineResult = field(default_factory=lambda: pl.ReadPipelineResult(found=True))

    @fake(act.START_STEP)
    async def start_step(self, inp: pl.StartStepInput) -> pl.StartStepResult:
        if inp.step in self.step_errors:
            return pl.StartStepResult(error=self.step_errors[inp.step])
        job = f"{inp.pipeline}-{inp.step}" + (f"-{inp.attempt}" if inp.attempt > 1 else "")
        return pl.StartStepResult(job, f"uid-{job}")

    @fake(act.READ_STEP_JOBS)
    async def read_step_jobs(self, inp: pl.ReadJobsInput) -> pl.ReadJobsResult:
        return pl.ReadJobsResult({j: self.ends.get(j, pl.JobEnd()) for j in inp.jobs})

    @fake(act.DELETE_OWNED)
    async def delete_owned(self, inp: pl.DeleteOwnedInput) -> int:
        return len(inp.only)

    @fake(act.WRITE_PIPELINE_STATUS)
    async def write_pipeline_status(self, patch: pl.PipelineStatusPatch) -> bool:
        return True

    @fake(act.READ_PIPELINE)
    async def read_pipeline(self, inp: pl.ReadPipelineInput) -> pl.ReadPipelineResult:
        return self.stored

    def pipeline(self) -> list[Callable[..., Any]]:
        names = "start_step read_step_jobs delete_owned write_pipeline_status read_pipeline"
        return methods(self, f"{names} remove_object")


@dataclass
class ScheduleFakes(Fakes):
    synced: pl.SyncScheduleResult = field(default_factory=lambda: pl.SyncScheduleResult(found=True))
    run: pl.RunRef = field(default_factory=lambda: pl.RunRef("Job", "nightly-1", "uid-n1"))
    run_phase: str = ""  # what read_run answers ("" while the run's object runs)

    @fake(act.SYNC_SCHEDULE)
    async def sync_schedule(self, ref: pl.ScheduleRef) -> pl.SyncScheduleResult:
        return self.synced

    @fake(act.DROP_SCHEDULE)
    async def drop_schedule(self, ref: pl.ScheduleRef) -> None:
        """Recorded only."""

    @fake(act.START_RUN)
    async def start_run(self, inp: pl.StartRunInput) -> pl.RunRef:
        return self.run

    @fake(act.READ_RUN)
    async def read_run(self, inp: pl.ScheduleRunLook) -> pl.ReadRunResult:
        return pl.ReadRunResult(self.run_phase)

    @fake(act.STOP_RUN)
    async def stop_run(self, inp: pl.ScheduleRunLook) -> None:
        """Recorded only."""

    def schedule(self) -> list[Callable[..., Any]]:
        names = "sync_schedule drop_schedule start_run read_run stop_run remove_object"
        return methods(self, names)


@dataclass
class LinkFakes(Fakes):
    view: LinkView = field(default_factory=lambda: LinkView(True, source="a", target="b"))
    probe: ProbeResult = field(default_factory=lambda: ProbeResult(ok=True))

    @fake(act.VIEW_LINK)
    async def view_link(self, ref: LinkRef) -> LinkView:
        return self.view

    @fake(act.WRITE_LINK_STATUS)
    async def write_link_status(self, patch: LinkStatusPatch) -> bool:
        return True

    @fake(act.PROBE_TCP)
    async def probe_tcp(self, inp: ProbeInput) -> ProbeResult:
        return self.probe

    def link(self) -> list[Callable[..., Any]]:
        return [self.view_link, self.write_link_status, self.remove_object]


@dataclass
class ProvisionFakes(Fakes):
    # infra -> error type its launches raise ("Capacity" is retried, "Permanent" is not)
    launch_errors: dict[str, str] = field(default_factory=dict)
    replicas: int = 1  # what cluster_usage answers

    @fake(act.PROVISION_CLUSTER)
    async def provision_cluster(self, inp: LaunchInput) -> LaunchResult:
        error = self.launch_errors.get(inp.infra)
        if error:
            raise ApplicationError(
                f"{inp.infra}: no {error}", type=error, non_retryable=error == "Permanent"
            )
        await asyncio.sleep(0)
        return LaunchResult(inp.sky_cluster, inp.nodes, activity.info().attempt)

    @fake(act.UNPROVISION_CLUSTER)
    async def unprovision_cluster(self, inp: DownInput) -> int:
        return len(inp.sky_clusters)

    @fake(act.CLUSTER_USAGE)
    async def cluster_usage(self, inp: UsageInput) -> UsageResult:
        return UsageResult(self.replicas)

    def provision(self) -> list[Callable[..., Any]]:
        names = "provision_cluster unprovision_cluster cluster_usage"
        return [*self.control(), *methods(self, names)]
