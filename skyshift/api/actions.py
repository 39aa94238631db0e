"""What the routes that act through the lifecycle plane share (job logs and exec, schedule
trigger and backfill): they need the plane, read a small JSON request, and turn the plane's
failures into API errors by their kind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Path, Request
from pydantic import BaseModel, ValidationError

from skyshift.api.body import parse_json, read_bytes
from skyshift.api.deps import get_lifecycle, get_options
from skyshift.api.errors import ApiError, from_validation
from skyshift.api.lifecycle import Lifecycle

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def require_lifecycle(request: Request, needs: str) -> Lifecycle:
    """The lifecycle plane; 503 (saying that ``needs`` it) when the server runs without."""
    lifecycle = get_lifecycle(request)
    if lifecycle is None:
        raise ApiError(
            503,
            f"{needs} need the lifecycle plane (Temporal), which this API server runs "
            "without (SKYSHIFT_LIFECYCLE=off?)",
        )
    return lifecycle


async def read_request(request: Request, model: type[M], what: str) -> M:
    """The JSON body as ``model`` (within the server's limits); 422 naming the bad field."""
    limits = get_options(request).limits
    raw = await read_bytes(request, limits.max_bytes)
    try:
        return model.model_validate(await asyncio.to_thread(parse_json, raw, limits))
    except ValidationError as exc:
        raise from_validation(exc, what) from exc


def backend_error(exc: Exception, what: str) -> ApiError:
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


async def backend_call(call: Awaitable[T], what: str) -> T:
    """``call`` to the lifecycle plane; its failures as :func:`backend_error` maps them."""
    try:
        return await call
    except ApiError:
        raise
    except Exception as exc:
        log.warning("%s failed: %s", what, exc)
        raise backend_error(exc, what) from exc


def json_body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route whose JSON body is ``model``."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@dataclass(frozen=True)
class Target:
    """The object an action acts on (``/{namespace}/{plural}/{name}/<action>``)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def target(noun: str) -> Callable[..., Awaitable[Target]]:
    """A dependency reading the target from the path (OpenAPI: "The ``noun``'s name")."""

    async def dependency(
        namespace: str = Path(description=f"The {noun}'s namespace"),
        name: str = Path(description=f"The {noun}'s name"),
    ) -> Target:
        return Target(namespace, name)

    return dependency
