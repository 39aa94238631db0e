"""Job logs and exec: read from, or run in, a job's replicas on whatever cluster they run on.

The API only finds the job and hands it to the lifecycle plane, which knows where its replicas
were placed and calls the right cluster's skylet; the API never talks to a cluster itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field, ValidationError

from skyshift.api import handlers
from skyshift.api.body import parse_json, read_bytes
from skyshift.api.deps import authorize, get_lifecycle, get_options, get_store
from skyshift.api.errors import ApiError, from_validation
from skyshift.api.lifecycle import Lifecycle
from skyshift.models.meta import ArgvStr
from skyshift.models.registry import kind_info

log = logging.getLogger(__name__)

JOB = kind_info("jobs")
router = APIRouter(tags=["Job"])


class ExecRequest(BaseModel):
    command: list[ArgvStr] = Field(min_length=1, description='argv to run, e.g. ["ls", "-l"]')
    rank: int = Field(default=0, ge=0, description="Which replica (0-based)")


class ExecResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str


def _lifecycle(request: Request) -> Lifecycle:
    lifecycle = get_lifecycle(request)
    if lifecycle is None:
        raise ApiError(
            503,
            "logs and exec need the lifecycle plane (Temporal), which this API server runs "
            "without (SKYSHIFT_LIFECYCLE=off?)",
        )
    return lifecycle


def _backend_error(exc: Exception, what: str) -> ApiError:
    """Map a lifecycle failure by its kind (compat/Temporal error names, not their types)."""
    kind = str(getattr(exc, "type", None) or type(exc).__name__)
    message = str(exc) or kind
    if kind == "NotFound":
        return ApiError(404, f"{what}: {message}")
    if kind == "Unsupported":
        return ApiError(501, f"{what}: {message}")
    if kind in ("Permanent", "InvalidArgument", "ValueError"):
        return ApiError(400, f"{what}: {message}")
    if kind == "OpTimeout":
        return ApiError(504, f"{what}: {message}")
    if kind == "Transient":
        return ApiError(503, f"{what}: {message}")
    if kind in ("RPCError", "TimeoutError"):
        return ApiError(503, f"{what}: lifecycle plane unavailable: {message}")
    return ApiError(502, f"{what} failed: {message}")


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
    namespace: str = Path(description="The job's namespace"),
    name: str = Path(description="The job's name"),
    tail: int | None = Query(None, ge=0, description="Only the last N lines"),
    rank: int | None = Query(None, ge=0, description="Only this replica (0-based)"),
) -> PlainTextResponse:
    lifecycle = _lifecycle(request)
    job = await handlers.get_object(get_store(request), JOB, name, namespace)
    try:
        text = await lifecycle.logs(job, tail, rank)
    except ApiError:
        raise
    except Exception as exc:
        log.warning("logs of job %s/%s failed: %s", namespace, name, exc)
        raise _backend_error(exc, f"logs of job {namespace}/{name}") from exc
    return PlainTextResponse(text)


@router.post(
    "/{namespace}/jobs/{name}/exec",
    dependencies=[Depends(authorize("update", JOB, audit_action="exec"))],
    response_model=ExecResult,
    summary="Run a command in one replica of a job",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ExecRequest.model_json_schema()}},
        }
    },
)
async def job_exec(
    request: Request,
    namespace: str = Path(description="The job's namespace"),
    name: str = Path(description="The job's name"),
) -> Any:
    lifecycle = _lifecycle(request)
    limits = get_options(request).limits
    raw = await read_bytes(request, limits.max_bytes)
    try:
        body = ExecRequest.model_validate(await asyncio.to_thread(parse_json, raw, limits))
    except ValidationError as exc:
        raise from_validation(exc, "exec request") from exc
    job = await handlers.get_object(get_store(request), JOB, name, namespace)
    try:
        result = await lifecycle.exec(job, body.command, body.rank)
    except ApiError:
        raise
    except Exception as exc:
        log.warning("exec in job %s/%s failed: %s", namespace, name, exc)
        raise _backend_error(exc, f"exec in job {namespace}/{name}") from exc
    return JSONResponse(
        {
            "exit_code": int(result.get("exit_code", -1)),
            "stdout": str(result.get("stdout", "")),
            "stderr": str(result.get("stderr", "")),
        }
    )
