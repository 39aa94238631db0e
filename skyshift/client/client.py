"""The synchronous Python client of the SkyShift API (what ``skyctl`` and the tests use).

Objects go in and come out as plain manifest dicts (models are accepted as input). Every failure
raises :class:`~skyshift.client.errors.ApiError`; an unreachable server says where it looked and
how to start one.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx

from skyshift.client.base import (
    DEFAULT_TIMEOUT,
    JSON_PATCH,
    MERGE_PATCH,
    Pager,
    apply_body,
    decode,
    exec_result,
    headers_for,
    list_namespace,
    parse_event,
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
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult, WatchEvent
from skyshift.models import SkyObject

KindArg = str | type[SkyObject]
Manifest = Mapping[str, Any] | SkyObject
PatchType = Literal["json", "merge"]


class SkyShiftClient:
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
        target = resolve_target(server, token, namespace)
        self.server = target.server
        self.namespace = target.namespace
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=self.server,
            headers=headers_for(target.token),
            timeout=timeout,
            transport=transport,
        )

    # -- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SkyShiftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            return self._http.request(method, path, params=params, content=content, headers=headers)
        except httpx.TransportError as exc:
            raise error_from_transport(exc, self.server) from exc

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        return decode(self._send(method, path, **kw))

    def _obj(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        data = self._call(method, path, **kw)
        if not isinstance(data, dict):
            raise ApiError(0, "BadResponse", f"{method} {path}: expected a JSON object")
        return data

    # -- objects --------------------------------------------------------------------------------

    def create(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        """Create an object; 409 (AlreadyExists) if the name is taken."""
        data = to_manifest(obj)
        info, _, ns = manifest_target(data, namespace or self.namespace)
        return self._obj("POST", collection_path(info, ns), body=data)

    def get(self, kind: KindArg, name: str, namespace: str | None = None) -> dict[str, Any]:
        info = resolve_kind(kind)
        return self._obj("GET", object_path(info, name, namespace or self.namespace))

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
        info = resolve_kind(kind)
        path = collection_path(info, list_namespace(info, namespace, self.namespace))
        pager = Pager(info, limit, selector_string(label_selector))
        while pager.add(self._call("GET", path, params=pager.params)) and follow:
            pass
        return pager.result(follow)

    def update(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        """Replace an object (PUT). A stale ``metadata.resourceVersion`` gets 409 Conflict."""
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        return self._obj("PUT", object_path(info, name, ns), body=data)

    def patch(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        type: PatchType | None = None,
    ) -> dict[str, Any]:
        """JSON Patch (a list of operations) or JSON Merge Patch (a dict); inferred if not given."""
        info = resolve_kind(kind)
        kind_of_patch = type or ("merge" if isinstance(patch, Mapping) else "json")
        ctype = MERGE_PATCH if kind_of_patch == "merge" else JSON_PATCH
        body: Any = dict(patch) if isinstance(patch, Mapping) else [dict(op) for op in patch]
        path = object_path(info, name, namespace or self.namespace)
        return self._obj("PATCH", path, body=body, content_type=ctype)

    def delete(self, kind: KindArg, name: str, namespace: str | None = None) -> DeleteResult:
        """Delete; ``result.pending`` is true when a lifecycle is tearing the object down (202)."""
        info = resolve_kind(kind)
        resp = self._send("DELETE", object_path(info, name, namespace or self.namespace))
        data = decode(resp)
        return DeleteResult(resp.status_code, data if isinstance(data, dict) else None)

    def apply(self, obj: Manifest, namespace: str | None = None) -> ApplyResult:
        """Create, or update the spec/labels/annotations of an existing object (kubectl-style)."""
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        try:
            return ApplyResult("created", self._obj("POST", collection_path(info, ns), body=data))
        except ApiError as exc:
            if exc.status != 409:
                raise
            try:
                current = self.get(info.kind, name, ns)
            except ApiError:
                raise exc from None
        body = apply_body(data, current)
        if body is None:
            return ApplyResult("unchanged", current)
        return ApplyResult("configured", self._obj("PUT", object_path(info, name, ns), body=body))

    def watch(
        self,
        kind: KindArg,
        name: str | None = None,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Stream events after ``resource_version`` (or from now). Close the iterator to stop.

        ``timeout``: end quietly after about that many seconds (the server is asked to close
        the stream then, and an idle read gives up then too); None: until the server ends it.
        """
        info = resolve_kind(kind)
        ns = namespace or self.namespace
        path = (
            object_path(info, name, ns)
            if name
            else collection_path(info, list_namespace(info, namespace, self.namespace))
        )
        params = watch_params(resource_version, selector_string(label_selector), timeout)
        return self._stream(path, params, timeout)

    def _stream(
        self, path: str, params: dict[str, str], timeout: float | None
    ) -> Iterator[WatchEvent]:
        tmo = httpx.Timeout(self.timeout, read=timeout)
        try:
            with self._http.stream("GET", path, params=params, timeout=tmo) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    decode(resp)
                for line in resp.iter_lines():
                    event = parse_event(line)
                    if event is not None:
                        yield event
        except httpx.ReadTimeout:
            return
        except httpx.TransportError as exc:
            raise error_from_transport(exc, self.server) from exc

    # -- jobs -----------------------------------------------------------------------------------

    def logs(self, name: str, namespace: str | None = None, tail: int | None = None) -> str:
        """The job's logs as text (``tail``: last N lines)."""
        params = {"tail": str(tail)} if tail is not None else None
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/logs"
        data = self._call("GET", path, params=params)
        if data is None:
            return ""
        return data if isinstance(data, str) else json.dumps(data)

    def exec(
        self,
        name: str,
        command: builtins.list[str] | tuple[str, ...],
        namespace: str | None = None,
        rank: int = 0,
    ) -> ExecResult:
        """Run ``command`` in replica ``rank`` of a job; returns its exit code and output."""
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/exec"
        return exec_result(self._call("POST", path, body={"command": list(command), "rank": rank}))

    # -- server ---------------------------------------------------------------------------------

    def healthz(self) -> Any:
        """The server's liveness answer; raises :class:`ApiError` if it is down or unhealthy."""
        return self._call("GET", "/healthz")

    def readyz(self) -> Any:
        return self._call("GET", "/readyz")
