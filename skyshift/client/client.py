"""The synchronous Python client of the SkyShift API (what ``skyctl`` and the tests use).

Objects go in and come out as plain manifest dicts (models are accepted as input). Every failure
raises :class:`~skyshift.client.errors.ApiError`; an unreachable server says where it looked and
how to start one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from skyshift.client import calls
from skyshift.client.base import decode, parse_event
from skyshift.client.calls import Calls, KindArg, Op
from skyshift.client.types import WatchEvent
from skyshift.client.waiting import Follow, Pause

T = TypeVar("T")
P = ParamSpec("P")


def _blocking(
    op: Callable[Concatenate[Calls[Any], P], Op[T]],
) -> Callable[Concatenate[SkyShiftClient, P], T]:
    """The client method that carries out the call ``op`` (see :mod:`skyshift.client.calls`)."""

    def method(self: SkyShiftClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(op(self, *args, **kwargs))

    return calls.public_method(method, op)


class SkyShiftClient(Calls[httpx.BaseTransport]):
    """A client of one API server.

    ``server``: base URL (default: ``SKYSHIFT_SERVER``, else the current context of the config
    file). ``namespace``: used when a call names none (default: the context's namespace).
    ``transport`` lets tests plug in an ``httpx.MockTransport``.
    """

    def _connect(self, settings: dict[str, Any], transport: httpx.BaseTransport | None) -> None:
        self._http = httpx.Client(**settings, transport=transport)

    # -- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SkyShiftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, op: Op[T]) -> T:
        """Carry out a call (see :mod:`skyshift.client.calls`): take each step it asks for."""
        reply: calls.Reply = None
        while not isinstance(request := calls.step(op, reply), calls.Finished):
            reply = self._take(request)
        return request.value

    def _take(self, request: calls.Step) -> calls.Reply:
        if isinstance(request, Pause):
            time.sleep(request.seconds)
        elif isinstance(request, Follow):
            with contextlib.closing(self.watch(**request.watch_args)) as events:
                for event in events:
                    if request.take(event):
                        break
        else:
            try:
                return self._http.request(**request.send_args())
            except httpx.TransportError as exc:
                return calls.unreachable(exc, self.server)
        return None

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        """``method path`` with ``params``/``body``/``content_type``: the decoded answer."""
        return self._run(self._call_op(method, path, **kw))

    # -- calls: each is written once in skyshift.client.calls ---------------------------------

    create = _blocking(Calls._create_op)
    get = _blocking(Calls._get_op)
    list = _blocking(Calls._list_op)
    update = _blocking(Calls._update_op)
    patch = _blocking(Calls._patch_op)
    delete = _blocking(Calls._delete_op)
    apply = _blocking(Calls._apply_op)
    wait = _blocking(Calls._wait_op)
    logs = _blocking(Calls._logs_op)
    exec = _blocking(Calls._exec_op)
    trigger_schedule = _blocking(Calls._trigger_schedule_op)
    backfill_schedule = _blocking(Calls._backfill_schedule_op)
    healthz = _blocking(Calls._healthz_op)
    readyz = _blocking(Calls._readyz_op)

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
        with calls.watch_errors(self.server), self._http.stream(**args) as resp:
            if resp.status_code >= 400:
                resp.read()
                decode(resp)
            for line in resp.iter_lines():
                event = parse_event(line)
                if event is not None:
                    yield event
