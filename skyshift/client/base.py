"""What the sync and async clients share: settings resolution, decoding, paging and apply logic.

Keeping the pure parts here means the two clients differ only in ``await``, and all of the
behaviour worth testing can be tested without a server.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import httpx

from skyshift.client.config import load_config, resolve_server, resolve_token
from skyshift.client.errors import ApiError, error_from_response
from skyshift.client.paths import ALL_NAMESPACES
from skyshift.client.types import ExecResult, WatchEvent
from skyshift.models import KindInfo, parse_object

DEFAULT_TIMEOUT = 30.0
#: a logs read: the API answers it within its own bound (50 s, a 504 naming the cluster that did
#: not answer; lifecycle/starter.py LOGS_BUDGET), so the client waits longer than that
LOGS_READ_TIMEOUT = 60.0
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Target:
    """Where a client talks to, resolved once from arguments, environment and the config file."""

    server: str
    token: str | None
    namespace: str


def resolve_target(server: str | None, token: str | None, namespace: str | None) -> Target:
    """``--server`` > ``SKYSHIFT_SERVER`` > current context; token (``SKYSHIFT_TOKEN``) and
    namespace likewise."""
    try:
        cfg = load_config()
    except (OSError, ValueError) as exc:
        raise ApiError(0, "BadConfig", f"cannot read the skyctl config file: {exc}") from exc
    ctx = cfg.current()
    return Target(
        server=resolve_server(server, cfg),
        token=token if token is not None else (resolve_token(ctx) or None),
        namespace=namespace or ctx.namespace or "default",
    )


def headers_for(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "skyshift-client"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def decode(resp: httpx.Response) -> Any:
    """The body of a successful response (JSON or text); an :class:`ApiError` otherwise."""
    if resp.status_code >= 400:
        raise error_from_response(resp.status_code, resp.content)
    if not resp.content:
        return None
    if "json" in resp.headers.get("content-type", ""):
        try:
            return resp.json()
        except ValueError:
            pass
    return resp.text


def list_namespace(info: KindInfo, namespace: str | None, default: str) -> str | None:
    """None -> the client's namespace; ``"all"`` -> every namespace; cluster kinds: none."""
    if not info.namespaced:
        return None
    if namespace == ALL_NAMESPACES:
        return ALL_NAMESPACES
    return namespace or default


class Pager:
    """Accumulates the pages of a list, following ``metadata.continue``."""

    def __init__(self, info: KindInfo, limit: int | None, label_selector: str | None) -> None:
        self.info = info
        self.items: list[dict[str, Any]] = []
        self.first: dict[str, Any] | None = None
        self.params: dict[str, str] = {}
        self.token: str | None = None
        if limit:
            self.params["limit"] = str(limit)
        if label_selector:
            self.params["labelSelector"] = label_selector

    def add(self, page: Any) -> bool:
        """Take one page; True when another page should be fetched."""
        if not isinstance(page, dict):
            raise ApiError(0, "BadResponse", f"list of {self.info.plural}: expected a JSON object")
        self.first = self.first or page
        self.items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
        meta = page.get("metadata") or {}
        self.token = meta.get("continue") or None
        if self.token:
            self.params["continue"] = self.token
        return self.token is not None

    def result(self, follow: bool) -> dict[str, Any]:
        first = self.first or {}
        meta = dict(first.get("metadata") or {})
        meta["continue"] = None if follow else self.token
        return {
            "apiVersion": first.get("apiVersion", "skyshift.io/v1"),
            "kind": first.get("kind") or f"{self.info.kind}List",
            "metadata": meta,
            "items": self.items,
        }


def watch_params(
    resource_version: str | None, label_selector: str | None, timeout: float | None = None
) -> dict[str, str]:
    """Query of a watch; with a timeout the server also ends the stream (``timeoutSeconds``),
    since its keep-alive lines would otherwise keep an idle stream open forever."""
    params = {"watch": "true"}
    if timeout is not None:
        params["timeoutSeconds"] = str(max(1, math.ceil(timeout)))
    if resource_version:
        params["resourceVersion"] = str(resource_version)
    if label_selector:
        params["labelSelector"] = label_selector
    return params


def parse_event(line: str) -> WatchEvent | None:
    """One NDJSON line -> event; blank keep-alive lines -> None; ``ERROR`` events raise."""
    line = line.strip()
    if not line:
        return None
    try:
        data = json.loads(line)
    except ValueError as exc:
        bad = line[:80]
        raise ApiError(0, "BadResponse", f"watch stream sent non-JSON: {bad}") from exc
    if not isinstance(data, dict):
        raise ApiError(0, "BadResponse", "watch stream sent a non-object event")
    etype = str(data.get("type", ""))
    obj = data.get("object")
    obj = obj if isinstance(obj, dict) else {}
    if etype == "ERROR" or (not etype and "error" in data):
        src = data if "error" in data else obj
        err = src.get("error") if isinstance(src.get("error"), dict) else src
        code = int(err.get("code") or 500) if isinstance(err, dict) else 500
        raise error_from_response(code, json.dumps({"error": err}))
    return WatchEvent(type=etype, object=obj)


def exec_result(data: Any) -> ExecResult:
    if not isinstance(data, dict):
        raise ApiError(0, "BadResponse", "exec: expected a JSON object with exit_code")
    return ExecResult(
        exit_code=int(data.get("exit_code", 0)),
        stdout=str(data.get("stdout") or ""),
        stderr=str(data.get("stderr") or ""),
    )


def _normal_spec(data: dict[str, Any]) -> Any:
    """The spec with defaults filled in, so a manifest compares equal to the stored object."""
    try:
        return parse_object({k: v for k, v in data.items() if k != "status"}).to_dict()["spec"]
    except (ValueError, TypeError):
        return data.get("spec")


def is_what_was_sent(sent: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``current`` has the spec, labels and annotations of the manifest ``sent``: after
    a create whose answer was lost, the object found under its name is taken as the one the
    create made (an identical object made by someone else at the same moment cannot be told
    apart, and is what was asked for all the same)."""
    smeta, cmeta = sent.get("metadata") or {}, current.get("metadata") or {}
    if any((smeta.get(k) or {}) != (cmeta.get(k) or {}) for k in ("labels", "annotations")):
        return False
    return bool(_normal_spec(sent) == _normal_spec(current))


def apply_body(desired: dict[str, Any], current: dict[str, Any]) -> dict[str, Any] | None:
    """The PUT body that makes ``current`` look like ``desired``, or None when nothing changes.

    Spec, labels and annotations come from the manifest; everything the server owns (uid,
    status, timestamps) is kept, and ``resourceVersion`` guards against a concurrent writer.
    """
    dmeta = desired.get("metadata") or {}
    cmeta = dict(current.get("metadata") or {})
    body = dict(current)
    meta = dict(cmeta)
    for key in ("labels", "annotations"):
        if key in dmeta:
            meta[key] = dmeta[key] or {}
    body["metadata"] = meta
    if "spec" in desired:
        body["spec"] = desired["spec"]
    same_meta = all(meta.get(k) == cmeta.get(k) for k in ("labels", "annotations"))
    if same_meta and _normal_spec(body) == _normal_spec(current):
        return None
    return body
