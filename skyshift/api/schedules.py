"""Schedule actions that are not object writes: run now (trigger) and backfill a past range.

Pause and resume are ``spec.suspend`` (a patch), so they are stored like every other change;
these two act on the Temporal Schedule through the lifecycle plane and leave the object as is
(the runs they start update its status).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator

from skyshift.api import actions, handlers
from skyshift.api.actions import Target, target
from skyshift.api.deps import authorize, check_spawns, get_store
from skyshift.api.errors import ApiError
from skyshift.api.rules import spawned
from skyshift.models.registry import kind_info
from skyshift.models.schedule import OverlapPolicy, parse_duration

SCHEDULE = kind_info("schedules")
_NEEDS = "schedules"
router = APIRouter(tags=["Schedule"])
MAX_BACKFILL_RUNS = 1000


class BackfillRequest(BaseModel):
    start: datetime = Field(description="RFC 3339; runs scheduled at or after it")
    end: datetime = Field(description="RFC 3339; runs scheduled before it")
    overlapPolicy: OverlapPolicy = Field(
        default="AllowAll", description="How the backfilled runs overlap each other"
    )

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        """In UTC (no zone: UTC); a time whose UTC is before year 1 or after 9999 (e.g.
        ``0001-01-01T00:00:00+01:00``) cannot be sent to Temporal, so it is refused here."""
        aware = v if v.tzinfo else v.replace(tzinfo=UTC)
        try:
            return aware.astimezone(UTC)
        except OverflowError:
            raise ValueError(
                "out of range: in UTC it must be from 0001-01-01 to 9999-12-31"
            ) from None


def most_runs(spec: dict[str, Any], seconds: float) -> int:
    """An upper bound of the runs a schedule can have in ``seconds`` (cron: at most one a
    minute, one an hour when the minute is fixed or a macro is used)."""
    if spec.get("interval"):
        period = parse_duration(str(spec["interval"]))
    else:
        cron = str(spec.get("cron") or "")
        minute = cron.split()[0] if cron.split() else ""
        period = 3600 if cron.startswith("@") or minute.isdigit() else 60
    return int(seconds // max(period, 1)) + 1


async def _schedule(request: Request, at: Target) -> dict[str, Any]:
    """The schedule to run, if the caller may create what its runs create."""
    obj = await handlers.get_object(get_store(request), SCHEDULE, at.name, at.namespace)
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        raise ApiError(409, f"schedule {at.name} is being deleted", reason="Deleting")
    await check_spawns(request, spawned(SCHEDULE, obj))
    return obj


@router.post(
    "/{namespace}/schedules/{name}/trigger",
    dependencies=[Depends(authorize("update", SCHEDULE, audit_action="trigger"))],
    status_code=202,
    summary="Run a schedule now",
    description="One run now, even while the schedule is paused, under its overlap policy. "
    "Needs `update` on the schedule and the rights to create what it runs (jobs; pipelines "
    "too for a pipelineTemplate).",
)
async def trigger(
    request: Request,
    at: Target = Depends(target("schedule")),
) -> JSONResponse:
    lifecycle = actions.require_lifecycle(request, _NEEDS)
    obj = await _schedule(request, at)
    await actions.backend_call(lifecycle.trigger_schedule(obj), f"trigger schedule {at}")
    return JSONResponse({"schedule": at.name, "triggered": True}, status_code=202)


@router.post(
    "/{namespace}/schedules/{name}/backfill",
    dependencies=[Depends(authorize("update", SCHEDULE, audit_action="backfill"))],
    status_code=202,
    summary="Run a schedule for a past time range",
    description=f"One run for every time the schedule would have fired from start to end "
    f"(both included), at most {MAX_BACKFILL_RUNS} runs. Needs `update` on the schedule and the "
    "rights to create what it runs (jobs; pipelines too for a pipelineTemplate).",
    openapi_extra=actions.json_body_doc(BackfillRequest),
)
async def backfill(
    request: Request,
    at: Target = Depends(target("schedule")),
) -> JSONResponse:
    lifecycle = actions.require_lifecycle(request, _NEEDS)
    body = await actions.read_request(request, BackfillRequest, "backfill request")
    if body.end <= body.start:
        raise ApiError(422, "end must be after start", field="end")
    obj = await _schedule(request, at)
    bound = most_runs(obj.get("spec") or {}, (body.end - body.start).total_seconds())
    if bound > MAX_BACKFILL_RUNS:
        raise ApiError(
            422,
            f"this range can hold up to {bound} runs of the schedule; backfill at most "
            f"{MAX_BACKFILL_RUNS} at a time (split the range)",
            field="end",
        )
    what = f"backfill schedule {at}"
    await actions.backend_call(
        lifecycle.backfill_schedule(obj, body.start, body.end, body.overlapPolicy), what
    )
    return JSONResponse(
        {
            "schedule": at.name,
            "start": body.start.isoformat(),
            "end": body.end.isoformat(),
            "overlapPolicy": body.overlapPolicy,
        },
        status_code=202,
    )
