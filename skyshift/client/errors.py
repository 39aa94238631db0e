"""The one error type the client raises, so callers (the CLI above all) handle a single shape.

Every failure, whether the server answered with an error body or never answered at all, becomes
an :class:`ApiError` whose ``str()`` is one line a user can act on, or, for an invalid object
with several problems, a line per problem with its field path.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

# Reasons for failures where no HTTP response exists (status 0).
UNREACHABLE = "Unreachable"
TIMEOUT = "Timeout"
#: The request went out but the connection was lost before the answer: it may have taken effect.
OUTCOME_UNKNOWN = "OutcomeUnknown"
#: Methods whose effect is the same done once or twice (a lost answer is just a retry away).
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class ApiError(Exception):
    """An error from (or on the way to) the SkyShift API.

    ``status`` is the HTTP status code, or 0 when the server could not be reached.
    ``reason`` is a short CamelCase word (``NotFound``, ``Conflict``, ``Invalid``, ...).
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        field: str | None = None,
        resource_version: str | None = None,
        details: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.field = field
        self.resource_version = resource_version
        #: Every problem the server found, as ``(field path, message)``.
        self.details = details or []

    def __str__(self) -> str:
        text = " ".join(self.message.split()) or self.reason
        if len(self.details) > 1:
            return self._all_problems(text)
        if self.field and self.field not in text:
            text = f"{self.field}: {text}"
        if self.status and self.reason and self.reason.lower() not in text.lower():
            text = f"{text} ({self.reason})"
        return text

    def _all_problems(self, text: str) -> str:
        """``invalid job: 2 problems:`` then one indented ``field: message`` line each."""
        head = text
        first_field = self.details[0][0]
        if first_field and f": {first_field}: " in text:
            head = text.split(f": {first_field}: ", 1)[0]
        elif text.lower().startswith("invalid ") and ": " in text:
            head = text.split(": ", 1)[0]
        lines = [" ".join(f"{f}: {m}".split()) if f else " ".join(m.split())
                 for f, m in self.details]
        return f"{head}: {len(lines)} problems:\n" + "\n".join(f"  {ln}" for ln in lines)

    def __repr__(self) -> str:
        return (
            f"ApiError(status={self.status}, reason={self.reason!r}, "
            f"message={self.message!r}, field={self.field!r})"
        )

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def outcome_unknown(self) -> bool:
        """The request reached the server, whose answer was lost: it may have taken effect."""
        return self.reason == OUTCOME_UNKNOWN


def _reason_for(status: int) -> str:
    try:
        phrase = httpx.codes.get_reason_phrase(status)
    except ValueError:
        phrase = ""
    return "".join(w.capitalize() for w in phrase.split()) or f"HTTP{status}"


def _from_fastapi_detail(status: int, detail: Any) -> ApiError:
    """FastAPI's own 422 body: ``{"detail": [{"loc": [...], "msg": ...}]}`` (or a string)."""
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        details = [
            (".".join(str(p) for p in d.get("loc", []) if p not in ("body", "query", "path")),
             str(d.get("msg", "invalid request")))
            for d in detail
            if isinstance(d, dict)
        ]
        field, msg = details[0]
        if len(details) > 1:
            msg = "invalid request"
        return ApiError(status, "Invalid", msg, field or None, details=details)
    return ApiError(status, _reason_for(status), str(detail))


def _details(raw: Any) -> list[tuple[str, str]]:
    """The server's ``details`` list (``[{field, message}]``) as pairs; junk is skipped."""
    if not isinstance(raw, list):
        return []
    return [
        (str(d.get("field") or ""), str(d.get("message") or ""))
        for d in raw
        if isinstance(d, dict)
    ]


NOT_LOGGED_IN = "not logged in or token expired: run `skyctl login`"
#: The reason the server gives a wrong user name or password at login (not a missing token).
LOGIN_FAILED = "LoginFailed"


class NotLoggedIn(ApiError):
    """401: no token, or an expired, tampered or revoked one; the message says what to do."""

    def __init__(self, server_message: str = "") -> None:
        super().__init__(401, "Unauthorized", NOT_LOGGED_IN)
        #: What the server said (e.g. "token expired"), for logs and debugging.
        self.server_message = server_message

    def __str__(self) -> str:
        return NOT_LOGGED_IN


def error_from_response(status: int, body: bytes | str) -> ApiError:
    """Build an :class:`ApiError` from any error response, JSON or not; a 401 (other than a
    failed login) is :class:`NotLoggedIn`."""
    err = _error_from_response(status, body)
    if status == 401 and err.reason != LOGIN_FAILED:
        return NotLoggedIn(err.message)
    return err


def _error_from_response(status: int, body: bytes | str) -> ApiError:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            rv = err.get("resourceVersion")
            return ApiError(
                status=int(err.get("code") or status),
                reason=str(err.get("reason") or _reason_for(status)),
                message=str(err.get("message") or ""),
                field=str(err["field"]) if err.get("field") else None,
                resource_version=str(rv) if rv is not None else None,
                details=_details(err.get("details")),
            )
        if isinstance(err, str):
            return ApiError(status, _reason_for(status), err)
        if "detail" in data:
            return _from_fastapi_detail(status, data["detail"])
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    return ApiError(status, _reason_for(status), first_line[:300] or _reason_for(status))


def error_from_transport(exc: httpx.TransportError, server: str) -> ApiError:
    """A request without an answer: say where we tried, what we know of its effect, and what to
    do. Connection refused, DNS failures and connect timeouts mean the request never left;
    a connection lost (or a read that timed out) after a write was sent leaves its outcome
    unknown (reason :data:`OUTCOME_UNKNOWN`), which is not "no server there"."""
    what = str(exc).strip() or type(exc).__name__
    if not _never_sent(exc):
        method = _method(exc)
        lost = ("did not answer in time" if isinstance(exc, httpx.TimeoutException)
                else f"dropped the connection before answering ({what})")
        if method in SAFE_METHODS:
            return ApiError(0, TIMEOUT if isinstance(exc, httpx.TimeoutException) else UNREACHABLE,
                            f"the SkyShift API at {server} {lost}; try again")
        return ApiError(
            0, OUTCOME_UNKNOWN,
            f"the outcome of {method or 'the request'} is unknown: the SkyShift API at {server} "
            f"{lost} after the request was sent, so it may or may not have taken effect; check "
            "with `skyctl get` before repeating it",
        )
    hint = (
        "start a local stack with `skyshift up`, or point skyctl at a running server "
        "with --server or SKYSHIFT_SERVER"
    )
    if isinstance(exc, httpx.TimeoutException):
        return ApiError(0, TIMEOUT, f"the SkyShift API at {server} did not answer in time")
    if isinstance(exc, httpx.ConnectError) and "refused" in what.lower():
        what = "connection refused"
    return ApiError(0, UNREACHABLE, f"cannot reach the SkyShift API at {server} ({what}): {hint}")


def _never_sent(exc: httpx.TransportError) -> bool:
    """Failures that happen before a byte of the request reaches the server."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
                      | httpx.UnsupportedProtocol | httpx.ProxyError)


def _method(exc: httpx.TransportError) -> str:
    try:
        return exc.request.method.upper()
    except RuntimeError:  # no request attached to the error
        return ""
