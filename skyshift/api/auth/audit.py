"""The audit trail: one record per mutation (who, what, when, result), kept in etcd.

Records live under their own key prefix (``{store prefix}/audit/...``), named so that a plain key
listing returns the newest first; ``GET /audit`` pages through them for admins. They never hold
request bodies, so no password or invite secret can end up there.

:class:`AuditMiddleware` writes the record after the response is sent, for every POST, PUT,
PATCH and DELETE. Routes say what the request was about through :func:`note` (the
authorization dependency does it for every object route); requests that never authenticated
are only logged (writing them to etcd would let anyone fill it). A failed audit write is logged
and does not undo the mutation.

The actor (``user``) of a record is always a verified name: the token's user, or the account a
login or registration just proved. Failed logins and registrations are recorded as
:data:`ANONYMOUS` with the client address (the name they tried is only a detail), and are
throttled per address before they get here; on top of that, one replica writes at most
``anonymous_per_minute`` such records, and only logs the rest.

Denied requests (401/403) of an authenticated user are bounded per user the same way: at most
``denied_per_minute`` records per user per minute (issue 26: a user with no rights wrote 3,000
records in 4.7 s); the rest are logged only, and counted: the user's next denied record that is
written says how many were left out (``details.deniedNotRecorded``).

A request the user store could not answer (etcd down, 503) is recorded under the user its token
was signed for, with ``details.identity`` saying so (the write itself usually fails then, and
the log line names the user).

Records older than the retention (``SKYSHIFT_AUDIT_RETENTION_DAYS``, default 90; 0 keeps them
forever) are pruned by the writer at most once per ``PRUNE_EVERY`` seconds: because names sort
newest first, everything older than the cutoff is one contiguous key range, removed in one etcd
request.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skyshift.store import ObjectStore, StoreError

log = logging.getLogger("skyshift.audit")

AUDIT = "audit"
MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_STATE_KEY = "skyshift_audit"
_MAX_NS = 10**20
PRUNE_EVERY = 600.0  # seconds between two prunes by one API replica
#: The actor of records about callers that proved no identity (not a valid user name).
ANONYMOUS = "system:anonymous"
ANONYMOUS_PER_MINUTE = 60
DENIED_PER_MINUTE = 30  # denied records per user per minute
_MAX_USERS = 10_000  # users a replica keeps a denied budget for


def note(request: Request, **fields: Any) -> None:
    """Record facts about this request for its audit record (user, action, resource, ...)."""
    state: dict[str, Any] = request.scope.setdefault("state", {})
    record = state.setdefault(_STATE_KEY, {})
    record.update({k: v for k, v in fields.items() if v is not None})


def record_name(now_ns: int) -> str:
    """Newest-first sortable key: inverted nanoseconds, plus randomness against collisions."""
    return f"{_MAX_NS - now_ns:020d}-{secrets.token_hex(4)}"


def cutoff_name(before_ns: int) -> str:
    """The smallest record name of anything written before ``before_ns``."""
    return f"{_MAX_NS - before_ns:020d}"


class AuditLog:
    def __init__(self, store: ObjectStore, retention_days: float = 90.0) -> None:
        self.store = store
        self.retention_days = retention_days
        self._pruned_at = float("-inf")

    async def prune(self, now_ns: int | None = None) -> int:
        """Remove the records older than the retention; returns how many went."""
        if self.retention_days <= 0:
            return 0
        now_ns = time.time_ns() if now_ns is None else now_ns
        cutoff = now_ns - int(self.retention_days * 86400 * 1e9)
        removed = await self.store.delete_from(AUDIT, cutoff_name(cutoff))
        if removed:
            log.info("pruned %d audit records older than %g days", removed, self.retention_days)
        return removed

    async def write(self, fields: dict[str, Any]) -> None:
        now_ns = time.time_ns()
        if time.monotonic() - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = time.monotonic()
            try:
                await self.prune(now_ns)
            except (StoreError, OSError) as exc:
                log.warning("audit records not pruned: %s", exc)
        stamp = datetime.fromtimestamp(now_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        record = {
            "kind": "AuditRecord",
            "metadata": {"name": record_name(now_ns), "creationTimestamp": stamp},
            "time": stamp,
            **{k: v for k, v in fields.items() if k not in ("kind", "metadata")},
        }
        await self.store.create(AUDIT, record)

    async def list(
        self, limit: int | None, continue_token: str | None, user: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Newest first; ``user`` filters by who (applied within each page)."""
        result = await self.store.list(AUDIT, limit=limit, continue_token=continue_token)
        items = [r for r in result.items if user is None or r.get("user") == user]
        return items, result.continue_token


Writer = Callable[[dict[str, Any]], Awaitable[None]]


class Budget:
    """At most ``limit`` takes per ``window`` seconds (a fixed window: cheap, and only a cap)."""

    def __init__(
        self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self._start = float("-inf")
        self._used = 0

    def take(self) -> bool:
        now = self.clock()
        if now - self._start >= self.window:
            self._start, self._used = now, 0
        if self._used >= self.limit:
            return False
        self._used += 1
        return True


class UserBudgets:
    """A :class:`Budget` per user (at most ``_MAX_USERS`` kept), counting refused takes."""

    def __init__(
        self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._budgets: dict[str, Budget] = {}
        self._left_out: dict[str, int] = {}

    def take(self, user: str) -> tuple[bool, int]:
        """(whether this one may be recorded, how many were left out before it)."""
        budget = self._budgets.get(user)
        if budget is None:
            if len(self._budgets) >= _MAX_USERS:
                self._budgets.pop(next(iter(self._budgets)))
            budget = self._budgets[user] = Budget(self.limit, self.window, self.clock)
        if not budget.take():
            self._left_out[user] = self._left_out.get(user, 0) + 1
            return False, 0
        return True, self._left_out.pop(user, 0)


class AuditMiddleware:
    """Writes an audit record after every mutating request (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        writer: Writer | None = None,
        anonymous_per_minute: int = ANONYMOUS_PER_MINUTE,
        denied_per_minute: int = DENIED_PER_MINUTE,
    ) -> None:
        self.app = app
        self.writer = writer
        self.anonymous = Budget(anonymous_per_minute)
        self.denied = UserBudgets(denied_per_minute)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in MUTATIONS or self.writer is None:
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        status = {"code": 500}

        async def watch_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch_status)
        finally:
            await self._record(scope, state.get(_STATE_KEY) or {}, status["code"])

    async def _record(self, scope: Scope, noted: dict[str, Any], code: int) -> None:
        client = scope.get("client")
        fields: dict[str, Any] = {
            "user": noted.get("user") or "",
            "action": noted.get("action") or scope["method"].lower(),
            "resource": noted.get("resource") or "",
            "namespace": noted.get("namespace"),
            "name": noted.get("name"),
            "path": scope.get("path", ""),
            "method": scope["method"],
            "code": code,
            "result": "success" if code < 400 else ("denied" if code in (401, 403) else "failure"),
            "client": client[0] if client else "",
        }
        if noted.get("details"):
            fields["details"] = noted["details"]
        fields = {k: v for k, v in fields.items() if v is not None}
        if (
            not fields["user"]
            or code == 429
            or (fields["user"] == ANONYMOUS and not self.anonymous.take())
            or not self._denied_budget(fields)
        ):
            # Unauthenticated, throttled, or past the budget of anonymous records: logged
            # only, so nobody can flood etcd with records.
            log.info(
                "%s %s by %r -> %s from %s",
                fields["method"],
                fields["path"],
                fields["user"],
                code,
                fields["client"],
            )
            return
        try:
            assert self.writer is not None
            await self.writer(fields)
        except (StoreError, OSError) as exc:
            log.warning("audit record not written (%s): %s", exc, fields)

    def _denied_budget(self, fields: dict[str, Any]) -> bool:
        """False past the user's budget of denied records; the first record written after
        some were left out says how many."""
        if fields["result"] != "denied" or fields["user"] == ANONYMOUS:
            return True
        ok, left_out = self.denied.take(fields["user"])
        if ok and left_out:
            fields["details"] = {**(fields.get("details") or {}), "deniedNotRecorded": left_out}
        return ok
