"""One error shape for every failure the API returns, and the handlers that produce it.

Clients (the CLI, the Python client, scripts) parse a single JSON shape whatever went wrong::

    {"error": {"code": 422, "reason": "Invalid", "message": "...", "field": "spec.replicas",
               "details": [{"field": "spec.replicas", "message": "..."}],
               "resourceVersion": "42"}}        # resourceVersion only on 409 Conflict

``field``, ``details`` and ``resourceVersion`` are present only when they mean something. Store
errors, pydantic validation errors and FastAPI's own request errors are all mapped here, and any
other exception becomes a 500 whose body never carries a traceback (the log does).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from skyshift.store import errors as store_errors

log = logging.getLogger(__name__)

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    501: "NotImplemented",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error with an HTTP status that the handlers render in the common shape."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        field: str | None = None,
        details: list[dict[str, Any]] | None = None,
        resource_version: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Error")
        self.field = field
        self.details = details
        self.resource_version = resource_version
        #: Response headers (``WWW-Authenticate`` on 401, ``Retry-After`` on 429).
        self.headers = headers

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "reason": self.reason, "message": self.message}
        if self.field is not None:
            err["field"] = self.field
        if self.details:
            err["details"] = self.details
        if self.resource_version is not None:
            err["resourceVersion"] = self.resource_version
        return {"error": err}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.code, headers=self.headers)


def loc_path(loc: tuple[int | str, ...] | list[int | str], prefix: str = "") -> str:
    """Turn a pydantic location into ``spec.resources.cpus`` (list indexes as ``ports[0]``)."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-", "function_")) or part in {"body"}:
            continue  # validator wrappers and FastAPI's "body" say nothing to the user
        else:
            out = f"{out}.{part}" if out else part
    return out


#: a validator that checks several fields names the one at fault first: "steps[2].dependsOn: ..."
_NAMED = re.compile(r"^([A-Za-z_]\w*(?:\[\d+\])?(?:\.[A-Za-z_]\w*(?:\[\d+\])?)*): (.+)$", re.S)


def _details(errors: list[dict[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    out = []
    for e in errors:
        msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
        field = loc_path(tuple(e.get("loc", ())), prefix)
        if (named := _NAMED.match(msg)) is not None:
            inner = named.group(1)
            field = f"{field}.{inner}" if field and not inner.startswith("metadata.") else inner
            msg = named.group(2)
        out.append({"field": field, "message": msg})
    return out


def from_validation(exc: ValidationError, what: str = "object") -> ApiError:
    """422 naming the first bad field; every error is listed in ``details``."""
    details = _details(exc.errors(include_url=False, include_input=False))  # type: ignore[arg-type]
    first = details[0] if details else {"field": "", "message": "invalid"}
    field = first["field"] or None
    where = f"{first['field']}: " if first["field"] else ""
    return ApiError(422, f"invalid {what}: {where}{first['message']}", field=field, details=details)


def from_store(exc: store_errors.StoreError) -> ApiError:
    """Map a store error to the HTTP status a client can act on."""
    msg = str(exc) or type(exc).__name__
    if isinstance(exc, store_errors.NotFound):
        return ApiError(404, msg)
    if isinstance(exc, store_errors.AlreadyExists):
        return ApiError(409, msg, reason="AlreadyExists")
    if isinstance(exc, store_errors.Conflict):
        rv = getattr(exc, "current_resource_version", None)
        return ApiError(409, msg, resource_version=None if rv is None else str(rv))
    if isinstance(exc, store_errors.Expired):
        return ApiError(410, msg)
    if isinstance(exc, store_errors.InvalidSelector):
        return ApiError(400, f"invalid labelSelector: {msg}", field="labelSelector")
    if isinstance(exc, store_errors.InvalidArgument):
        return ApiError(400, msg)
    if isinstance(exc, store_errors.TooLarge):
        return ApiError(413, msg)
    if isinstance(exc, store_errors.Unavailable):
        return ApiError(503, f"object store (etcd) unavailable: {msg}")
    return ApiError(500, f"object store error: {msg}")


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the common shape."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def store_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, store_errors.StoreError)
        err = from_store(exc)
        if err.code >= 500:
            log.warning("store error: %s", exc)
        return err.response()

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ValidationError)
        return from_validation(exc).response()

    async def request_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        details = _details(list(exc.errors()))
        first = details[0] if details else {"field": "", "message": "invalid request"}
        return ApiError(
            422,
            f"invalid request: {first['field']}: {first['message']}",
            field=first["field"] or None,
            details=details,
        ).response()

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return ApiError(exc.status_code, str(exc.detail)).response()

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return ApiError(500, "internal error (see the server log)").response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(store_errors.StoreError, store_error)
    app.add_exception_handler(ValidationError, validation_error)
    app.add_exception_handler(RequestValidationError, request_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
