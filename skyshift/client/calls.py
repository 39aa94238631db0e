"""Every call of the API written once, without I/O; the sync and async clients only carry it out.

A call is a generator (:data:`Op`): it yields each :class:`Request` it needs and is sent the
``httpx.Response`` (or, if the server was never reached, thrown the :class:`ApiError` that says
so), then returns the call's result. :func:`step` resumes it; ``SkyShiftClient`` and
``AsyncSkyShiftClient`` differ only in how they send a request (with or without ``await``).
Paths, parameters, bodies, decoding, paging and apply all live here, so both clients behave
alike by construction.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import json
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx

from skyshift.client.base import (
    DEFAULT_TIMEOUT,
    JSON_PATCH,
    LOGS_READ_TIMEOUT,
    MERGE_PATCH,
    Pager,
    apply_body,
    decode,
    exec_result,
    headers_for,
    is_what_was_sent,
    list_namespace,
    resolve_target,
    watch_params,
)
from skyshift.client.errors import ApiError, error_from_transport
from skyshift.client.paths import (
    collection_path,
    manifest_target,
    object_path,
    resolve_kind,
    selector_string,
    to_manifest,
)
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult
from skyshift.client.waiting import (
    WATCH_PAUSE,
    Follow,
    Pause,
    WaitFor,
    deleted_while_waiting,
    parse_for,
    timed_out,
)
from skyshift.models import SkyObject

KindArg = str | type[SkyObject]
Manifest = Mapping[str, Any] | SkyObject
PatchType = Literal["json", "merge"]

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One HTTP request of a call, relative to the client's server."""

    method: str
    path: str
    params: Mapping[str, str] | None = None
    body: Any = None
    content_type: str = "application/json"
    timeout: float | None = None  # this request's own, instead of the client's (a logs read)

    def send_args(self) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.request`` / ``httpx.AsyncClient.request``."""
        content = None if self.body is None else json.dumps(self.body).encode()
        headers = {"Content-Type": self.content_type} if content is not None else None
        args: dict[str, Any] = {
            "method": self.method,
            "url": self.path,
            "params": self.params,
            "content": content,
            "headers": headers,
        }
        if self.timeout is not None:
            args["timeout"] = self.timeout
        return args


@dataclass(frozen=True)
class Finished(Generic[T]):
    """What :func:`step` returns when the call has its result."""

    value: T


#: What a call asks its client to do: send a request (and be sent the response), or, in a
#: wait, follow a watch or pause (and be sent None).
Step = Request | Follow | Pause
#: A call: yields steps, is sent the responses to its requests, returns its result.
Op = Generator[Step, httpx.Response, T]
#: What a call is resumed with: the response, the failure to reach the server, or None to start.
Reply = httpx.Response | ApiError | None


def step(op: Op[T], reply: Reply) -> Step | Finished[T]:
    """Resume ``op`` with the reply to its last request: its next request, or its result."""
    try:
        if isinstance(reply, ApiError):
            return op.throw(reply)
        return op.send(reply)  # type: ignore[arg-type]  # None starts the generator
    except StopIteration as done:
        return Finished(done.value)


_WARNING = re.compile(r'^\d{3} \S+ "((?:[^"\\]|\\.)*)"')


def warnings_of(response: httpx.Response) -> list[str]:
    """The texts of a response's ``Warning: 299 - "..."`` headers (RFC 7234)."""
    out = []
    for value in response.headers.get_list("warning"):
        m = _WARNING.match(value)
        out.append(re.sub(r"\\(.)", r"\1", m.group(1)) if m else value)
    return out


def unreachable(exc: httpx.TransportError, server: str) -> ApiError:
    """The :class:`ApiError` of a request that never got an answer (caused by ``exc``)."""
    error = error_from_transport(exc, server)
    error.__cause__ = exc
    return error


F = TypeVar("F", bound=Callable[..., Any])


def public_method(method: F, op: Callable[..., Any]) -> F:
    """``method``, which carries out the call ``op``, named and documented as its public
    method (``_create_op`` -> ``create``), with ``op``'s parameters for ``help()``."""
    method.__name__ = method.__qualname__ = op.__name__.removeprefix("_").removesuffix("_op")
    method.__doc__ = op.__doc__
    signature = inspect.signature(op).replace(return_annotation=inspect.Signature.empty)
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


@contextlib.contextmanager
def watch_errors(server: str) -> Iterator[None]:
    """Around a watch stream: a read that waits past the watch's timeout ends it quietly; not
    reaching the server at all is an :class:`ApiError`."""
    try:
        yield
    except httpx.ReadTimeout:
        return
    except httpx.TransportError as exc:
        raise error_from_transport(exc, server) from exc


TransportT = TypeVar("TransportT")


class Calls(Generic[TransportT]):
    """The calls of :class:`~skyshift.client.SkyShiftClient`, shared with its async twin.

    ``server``, ``namespace`` (the default of calls that name none) and ``timeout`` are the
    client's settings; the ``_*_op`` methods are the calls of the same name.
    """

    server: str
    namespace: str
    timeout: float

    #: Called with the text of each ``Warning`` the server sends (e.g. a FilterPolicy naming a
    #: cluster that does not exist); None ignores them.
    on_warning: Callable[[str], None] | None = None

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        namespace: str | None = None,
        transport: TransportT | None = None,
    ) -> None:
        """``server``: base URL (default: ``SKYSHIFT_SERVER``, else the current context of the
        config file). ``namespace``: used when a call names none (default: the context's
        namespace). ``transport`` lets tests plug in an ``httpx.MockTransport``."""
        target = resolve_target(server, token, namespace)
        self.server = target.server
        self.namespace = target.namespace
        self.timeout = timeout
        headers = headers_for(target.token)
        self._connect({"base_url": self.server, "headers": headers, "timeout": timeout}, transport)

    def _connect(self, settings: dict[str, Any], transport: TransportT | None) -> None:
        """Make the client's httpx client from ``settings`` (its keyword arguments)."""
        raise NotImplementedError

    # -- plumbing -------------------------------------------------------------------------------

    def _send_op(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Op[httpx.Response]:
        response = yield Request(method, path, params, body, content_type, timeout)
        if self.on_warning is not None:
            for text in warnings_of(response):
                self.on_warning(text)
        return response

    def _call_op(self, method: str, path: str, **kw: Any) -> Op[Any]:
        return decode((yield from self._send_op(method, path, **kw)))

    def _obj_op(self, method: str, path: str, **kw: Any) -> Op[dict[str, Any]]:
        data = yield from self._call_op(method, path, **kw)
        if not isinstance(data, dict):
            raise ApiError(0, "BadResponse", f"{method} {path}: expected a JSON object")
        return data

    # -- objects --------------------------------------------------------------------------------

    def _create_op(self, obj: Manifest, namespace: str | None = None) -> Op[dict[str, Any]]:
        """Create an object; 409 (AlreadyExists) if the name is taken."""
        # POST; when the connection is lost after it was sent (outcome unknown), POST again:
        # creates are idempotent by name, so a 409 then means the first one may have worked,
        # and the object found under the name tells (_created_by_us).
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        path = collection_path(info, ns)
        try:
            return (yield from self._obj_op("POST", path, body=data))
        except ApiError as exc:
            if not exc.outcome_unknown:
                raise
            lost = exc
        try:
            return (yield from self._obj_op("POST", path, body=data))
        except ApiError as exc:
            if exc.status == 0:
                raise lost from exc  # still no answer: the outcome is still unknown
            if exc.status != 409:
                raise
            conflict = exc
        return (yield from self._created_by_us(data, info.kind, name, ns, conflict))

    def _created_by_us(
        self,
        sent: dict[str, Any],
        kind: str,
        name: str,
        ns: str | None,
        conflict: ApiError,
    ) -> Op[dict[str, Any]]:
        """After a lost answer and a 409 on the retry: the object if it is the one we sent,
        else the conflict, saying that what exists under the name is not what was sent."""
        try:
            current = yield from self._get_op(kind, name, ns)
        except ApiError:
            raise conflict from None
        if is_what_was_sent(sent, current):
            return current
        where = f" in namespace {ns}" if ns else ""
        raise ApiError(
            409,
            "AlreadyExists",
            f"{kind} {name} already exists{where} with another spec, labels or annotations than "
            "this request sent (the connection was lost before the server answered the first "
            "try, and the retry found it): it was not created by this request",
        ) from conflict

    def _get_op(self, kind: KindArg, name: str, namespace: str | None = None) -> Op[dict[str, Any]]:
        """The object ``name`` of ``kind``."""
        path = object_path(resolve_kind(kind), name, namespace or self.namespace)
        return (yield from self._obj_op("GET", path))

    def _list_op(
        self,
        kind: KindArg,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
        follow: bool = True,
    ) -> Op[dict[str, Any]]:
        """List objects as ``{"kind": "JobList", "metadata": {...}, "items": [...]}``.

        ``namespace``: None means the client's namespace, ``"all"`` every namespace (ignored for
        cluster-scoped kinds). ``limit`` is the page size; all pages are fetched unless
        ``follow=False`` (then ``metadata.continue`` holds the next page's token).
        """
        info = resolve_kind(kind)
        path = collection_path(info, list_namespace(info, namespace, self.namespace))
        pager = Pager(info, limit, selector_string(label_selector))
        while pager.add((yield from self._call_op("GET", path, params=pager.params))) and follow:
            pass
        return pager.result(follow)

    def _update_op(self, obj: Manifest, namespace: str | None = None) -> Op[dict[str, Any]]:
        """Replace an object (PUT). A stale ``metadata.resourceVersion`` gets 409 Conflict."""
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        return (yield from self._obj_op("PUT", object_path(info, name, ns), body=data))

    def _patch_op(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        type: PatchType | None = None,
    ) -> Op[dict[str, Any]]:
        """JSON Patch (a list of operations) or JSON Merge Patch (a dict); inferred if not given."""
        info = resolve_kind(kind)
        kind_of_patch = type or ("merge" if isinstance(patch, Mapping) else "json")
        ctype = MERGE_PATCH if kind_of_patch == "merge" else JSON_PATCH
        body: Any = dict(patch) if isinstance(patch, Mapping) else [dict(op) for op in patch]
        path = object_path(info, name, namespace or self.namespace)
        return (yield from self._obj_op("PATCH", path, body=body, content_type=ctype))

    def _delete_op(
        self, kind: KindArg, name: str, namespace: str | None = None
    ) -> Op[DeleteResult]:
        """Delete; ``result.pending`` is true when a lifecycle is tearing the object down (202)."""
        info = resolve_kind(kind)
        path = object_path(info, name, namespace or self.namespace)
        resp = yield from self._send_op("DELETE", path)
        data = decode(resp)
        return DeleteResult(resp.status_code, data if isinstance(data, dict) else None)

    def _apply_op(self, obj: Manifest, namespace: str | None = None) -> Op[ApplyResult]:
        """Create, or update the spec/labels/annotations of an existing object (kubectl-style)."""
        return (yield from self._apply_once(obj, namespace, again=True))

    def _apply_once(self, obj: Manifest, namespace: str | None, again: bool) -> Op[ApplyResult]:
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        try:
            created = yield from self._obj_op("POST", collection_path(info, ns), body=data)
            return ApplyResult("created", created)
        except ApiError as exc:
            if exc.outcome_unknown and again:  # apply is idempotent: do it once more
                return (yield from self._apply_once(data, ns, again=False))
            if exc.status != 409:
                raise
            try:
                current = yield from self._get_op(info.kind, name, ns)
            except ApiError:
                raise exc from None
        body = apply_body(data, current)
        if body is None:
            return ApplyResult("unchanged", current)
        updated = yield from self._obj_op("PUT", object_path(info, name, ns), body=body)
        return ApplyResult("configured", updated)

    def _wait_op(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None = None,
        until: str | WaitFor = "phase=Succeeded",
        timeout: float = 60.0,
    ) -> Op[dict[str, Any] | None]:
        """Wait until the object reaches a phase (``until="phase=Running"``) or is gone
        (``until="delete"``), following the API's watch; returns the object (None once deleted).

        Raises :class:`ApiError` with reason ``Timeout`` after ``timeout`` seconds, and with
        ``NotFound`` if the object is missing (or deleted) while a phase is awaited.
        """
        cond, what = parse_for(until), f"{resolve_kind(kind).kind.lower()} {name}"
        deadline = time.monotonic() + timeout
        try:
            last: dict[str, Any] | None = yield from self._get_op(kind, name, namespace)
        except ApiError as exc:
            if exc.not_found and cond.delete:
                return None
            raise
        while last is not None and not cond.met(last):
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out(what, cond, timeout, last)
            rv = (last.get("metadata") or {}).get("resourceVersion")
            args = {
                "kind": kind,
                "name": name,
                "namespace": namespace,
                "resource_version": rv,
                "timeout": left,
            }
            follow = Follow(args, cond, last)
            yield follow
            last = follow.last
            if not follow.seen:  # the stream ended early and empty: look again, without spinning
                yield Pause(min(WATCH_PAUSE, max(deadline - time.monotonic(), 0)))
        if last is None and not cond.delete:
            raise deleted_while_waiting(what, cond)
        return last

    def _watch_args(
        self,
        kind: KindArg,
        name: str | None,
        namespace: str | None,
        resource_version: str | None,
        label_selector: str | Mapping[str, str] | None,
        timeout: float | None,
    ) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.stream`` for a watch (an idle read ends it)."""
        info = resolve_kind(kind)
        ns = namespace or self.namespace
        path = (
            object_path(info, name, ns)
            if name is not None
            else collection_path(info, list_namespace(info, namespace, self.namespace))
        )
        return {
            "method": "GET",
            "url": path,
            "params": watch_params(resource_version, selector_string(label_selector), timeout),
            "timeout": httpx.Timeout(self.timeout, read=timeout),
        }

    # -- jobs -----------------------------------------------------------------------------------

    def _logs_op(self, name: str, namespace: str | None = None, tail: int | None = None) -> Op[str]:
        """The job's logs as text (``tail``: last N lines)."""
        params = {"tail": str(tail)} if tail is not None else None
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/logs"
        # the API answers a logs read within LOGS_BUDGET (a 504 naming a cluster that did not
        # answer): wait for that answer, past the client's usual timeout
        data = yield from self._call_op("GET", path, params=params, timeout=LOGS_READ_TIMEOUT)
        if data is None:
            return ""
        return data if isinstance(data, str) else json.dumps(data)

    def _exec_op(
        self,
        name: str,
        command: builtins.list[str] | tuple[str, ...],
        namespace: str | None = None,
        rank: int = 0,
    ) -> Op[ExecResult]:
        """Run ``command`` in replica ``rank`` of a job; returns its exit code and output."""
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/exec"
        body = {"command": list(command), "rank": rank}
        return exec_result((yield from self._call_op("POST", path, body=body)))

    # -- schedules ------------------------------------------------------------------------------

    def _trigger_schedule_op(self, name: str, namespace: str | None = None) -> Op[dict[str, Any]]:
        """Run a schedule now (even while it is paused)."""
        return (yield from self._schedule_op(name, namespace, "trigger"))

    def _backfill_schedule_op(
        self,
        name: str,
        start: str,
        end: str,
        namespace: str | None = None,
        overlap: str = "AllowAll",
    ) -> Op[dict[str, Any]]:
        """Run a schedule for every time it would have fired from ``start`` to ``end`` (RFC 3339,
        both included)."""
        body = {"start": start, "end": end, "overlapPolicy": overlap}
        return (yield from self._schedule_op(name, namespace, "backfill", body))

    def _schedule_op(
        self,
        name: str,
        namespace: str | None,
        action: str,
        body: dict[str, Any] | None = None,
    ) -> Op[dict[str, Any]]:
        path = object_path(resolve_kind("schedules"), name, namespace or self.namespace)
        data = yield from self._call_op("POST", f"{path}/{action}", body=body)
        return dict(data or {})

    # -- server ---------------------------------------------------------------------------------

    def _healthz_op(self) -> Op[Any]:
        """The server's liveness answer; raises :class:`ApiError` if it is down or unhealthy."""
        return (yield from self._call_op("GET", "/healthz"))

    def _readyz_op(self) -> Op[Any]:
        """The server's readiness answer (etcd, Temporal); an :class:`ApiError` if not ready."""
        return (yield from self._call_op("GET", "/readyz"))
