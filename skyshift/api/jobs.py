"""Job logs and exec: read from, or run in, a job's replicas on whatever cluster they run on.

The API only finds the job and hands it to the lifecycle plane, which knows where its replicas
were placed and calls the right cluster's skylet; the API never talks to a cluster itself.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from skyshift.api import actions, handlers
from skyshift.api.actions import Target, target
from skyshift.api.deps import authorize, get_store
from skyshift.models.meta import ArgvStr
from skyshift.models.registry import kind_info

JOB = kind_info("jobs")
_NEEDS = "logs and exec"
router = APIRouter(tags=["Job"])


class ExecRequest(BaseModel):
    command: list[ArgvStr] = Field(min_length=1, description='argv to run, e.g. ["ls", "-l"]')
    rank: int = Field(default=0, ge=0, description="Which replica (0-based)")


class ExecResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str


@router.get(
    "/{namespace}/jobs/{name}/logs",
    dependencies=[Depends(authorize("get", JOB))],
    response_class=PlainTextResponse,
    summary="Logs of a job's replicas",
    description="Plain text. `rank` selects one replica; `tail` keeps the last N lines. "
    "503 when the server runs without the lifecycle plane.",
)
async def job_logs(
    request: Request,
    at: Target = Depends(target("job")),
    tail: int | None = Query(None, ge=0, description="Only the last N lines"),
    rank: int | None = Query(None, ge=0, description="Only this replica (0-based)"),
) -> PlainTextResponse:
    lifecycle = actions.require_lifecycle(request, _NEEDS)
    job = await handlers.get_object(get_store(request), JOB, at.name, at.namespace)
    text = await actions.backend_call(lifecycle.logs(job, tail, rank), f"logs of job {at}")
    return PlainTextResponse(text)


@router.post(
    "/{namespace}/jobs/{name}/exec",
    dependencies=[Depends(authorize("update", JOB, audit_action="exec"))],
    response_model=ExecResult,
    summary="Run a command in one replica of a job",
    openapi_extra=actions.json_body_doc(ExecRequest),
)
async def job_exec(
    request: Request,
    at: Target = Depends(target("job")),
) -> Any:
    lifecycle = actions.require_lifecycle(request, _NEEDS)
    body = await actions.read_request(request, ExecRequest, "exec request")
    job = await handlers.get_object(get_store(request), JOB, at.name, at.namespace)
    call = lifecycle.exec(job, body.command, body.rank)
    result = await actions.backend_call(call, f"exec in job {at}")
    return JSONResponse(
        {
            "exit_code": int(result.get("exit_code", -1)),
            "stdout": str(result.get("stdout", "")),
            "stderr": str(result.get("stderr", "")),
        }
    )
