"""The synchronous Python client of the SkyShift API (what ``skyctl`` and the tests use).

Objects go in and come out as plain manifest dicts (models are accepted as input). Every failure
raises :class:`~skyshift.client.errors.ApiError`; an unreachable server says where it looked and
how to start one.
"""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import Generator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from skyshift.client.base import DEFAULT_TIMEOUT, decode, parse_event
from skyshift.client.calls import (
    Calls,
    Finished,
    KindArg,
    Manifest,
    Op,
    PatchType,
    Reply,
    step,
    unreachable,
    watch_errors,
)
from skyshift.client.errors import ApiError
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult, WatchEvent
from skyshift.client.waiting import (
    WATCH_PAUSE,
    WaitFor,
    deleted_while_waiting,
    parse_for,
    timed_out,
)

T = TypeVar("T")


class SkyShiftClient(Calls):
    """A client of one API server.

    ``server``: base URL (default: ``SKYSHIFT_SERVER``, else the current context of the config
    file). ``namespace``: used when a call names none (default: the context's namespace).
    ``transport`` lets tests plug in an ``httpx.MockTransport``.
    """

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        namespace: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        settings = self._settle(server, token, timeout, namespace)
        self._http = httpx.Client(**settings, transport=transport)

    # -- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SkyShiftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, op: Op[T]) -> T:
        """Carry out a call (see :mod:`skyshift.client.calls`): send each request it makes."""
        reply: Reply = None
        while not isinstance(request := step(op, reply), Finished):
            try:
                reply = self._http.request(**request.send_args())
            except httpx.TransportError as exc:
                reply = unreachable(exc, self.server)
        return request.value

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        """``method path`` with ``params``/``body``/``content_type``: the decoded answer."""
        return self._run(self._call_op(method, path, **kw))

    # -- objects --------------------------------------------------------------------------------

    def create(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        """Create an object; 409 (AlreadyExists) if the name is taken."""
        return self._run(self._create_op(obj, namespace))

    def get(self, kind: KindArg, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self._run(self._get_op(kind, name, namespace))

    def list(
        self,
        kind: KindArg,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
        follow: bool = True,
    ) -> dict[str, Any]:
        """List objects as ``{"kind": "JobList", "metadata": {...}, "items": [...]}``.

        ``namespace``: None means the client's namespace, ``"all"`` every namespace (ignored for
        cluster-scoped kinds). ``limit`` is the page size; all pages are fetched unless
        ``follow=False`` (then ``metadata.continue`` holds the next page's token).
        """
        return self._run(self._list_op(kind, namespace, label_selector, limit, follow))

    def update(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        """Replace an object (PUT). A stale ``metadata.resourceVersion`` gets 409 Conflict."""
        return self._run(self._update_op(obj, namespace))

    def patch(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        type: PatchType | None = None,
    ) -> dict[str, Any]:
        """JSON Patch (a list of operations) or JSON Merge Patch (a dict); inferred if not given."""
        return self._run(self._patch_op(kind, name, namespace, patch, type))

    def delete(self, kind: KindArg, name: str, namespace: str | None = None) -> DeleteResult:
        """Delete; ``result.pending`` is true when a lifecycle is tearing the object down (202)."""
        return self._run(self._delete_op(kind, name, namespace))

    def apply(self, obj: Manifest, namespace: str | None = None) -> ApplyResult:
        """Create, or update the spec/labels/annotations of an existing object (kubectl-style)."""
        return self._run(self._apply_op(obj, namespace))

    def watch(
        self,
        kind: KindArg,
        name: str | None = None,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Generator[WatchEvent, None, None]:
        """Stream events after ``resource_version`` (or from now). Close the iterator to stop.

        ``timeout``: end quietly after about that many seconds (the server is asked to close
        the stream then, and an idle read gives up then too); None: until the server ends it.
        """
        # built now, so that a bad kind or name fails here rather than at the first event
        args = self._watch_args(kind, name, namespace, resource_version, label_selector, timeout)
        return self._stream(args)

    def _stream(self, args: dict[str, Any]) -> Generator[WatchEvent, None, None]:
        with watch_errors(self.server), self._http.stream(**args) as resp:
            if resp.status_code >= 400:
                resp.read()
                decode(resp)
            for line in resp.iter_lines():
                event = parse_event(line)
                if event is not None:
                    yield event

    def wait(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None = None,
        until: str | WaitFor = "phase=Succeeded",
        timeout: float = 60.0,
    ) -> dict[str, Any] | None:
        """Wait until the object reaches a phase (``until="phase=Running"``) or is gone
        (``until="delete"``), following the API's watch; returns the object (None once deleted).

        Raises :class:`ApiError` with reason ``Timeout`` after ``timeout`` seconds, and with
        ``NotFound`` if the object is missing (or deleted) while a phase is awaited.
        """
        cond, what = parse_for(until), self._wait_subject(kind, name)
        deadline = time.monotonic() + timeout
        try:
            last: dict[str, Any] | None = self.get(kind, name, namespace)
        except ApiError as exc:
            if exc.not_found and cond.delete:
                return None
            raise
        while last is not None and not cond.met(last):
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out(what, cond, timeout, last)
            rv = (last.get("metadata") or {}).get("resourceVersion")
            events = self.watch(kind, name, namespace, resource_version=rv, timeout=left)
            seen = False
            with contextlib.closing(events):
                for event in events:
                    seen = True
                    if event.type == "DELETED":
                        last = None
                    elif event.type in ("ADDED", "MODIFIED"):
                        last = event.object
                    if last is None or cond.met(last):
                        break
            if not seen:  # the stream ended early and empty: look again, without spinning
                time.sleep(min(WATCH_PAUSE, max(deadline - time.monotonic(), 0)))
        if last is None and not cond.delete:
            raise deleted_while_waiting(what, cond)
        return last

    # -- jobs -----------------------------------------------------------------------------------

    def logs(self, name: str, namespace: str | None = None, tail: int | None = None) -> str:
        """The job's logs as text (``tail``: last N lines)."""
        return self._run(self._logs_op(name, namespace, tail))

    def exec(
        self,
        name: str,
        command: builtins.list[str] | tuple[str, ...],
        namespace: str | None = None,
        rank: int = 0,
    ) -> ExecResult:
        """Run ``command`` in replica ``rank`` of a job; returns its exit code and output."""
        return self._run(self._exec_op(name, command, namespace, rank))

    # -- schedules ------------------------------------------------------------------------------

    def trigger_schedule(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Run a schedule now (even while it is paused)."""
        return self._run(self._schedule_op(name, namespace, "trigger"))

    def backfill_schedule(
        self, name: str, start: str, end: str, namespace: str | None = None,
        overlap: str = "AllowAll",
    ) -> dict[str, Any]:
        """Run a schedule for every time it would have fired from ``start`` to ``end`` (RFC 3339,
        both included)."""
        body = {"start": start, "end": end, "overlapPolicy": overlap}
        return self._run(self._schedule_op(name, namespace, "backfill", body))

    # -- server ---------------------------------------------------------------------------------

    def healthz(self) -> Any:
        """The server's liveness answer; raises :class:`ApiError` if it is down or unhealthy."""
        return self._call("GET", "/healthz")

    def readyz(self) -> Any:
        return self._call("GET", "/readyz")
