"""Configuration, transport and error mapping of the Kubernetes adapter.

The official client's generated API classes decode every response into model objects, which is
slow for pod lists and would tempt code to pass vendor types around; the adapter instead sends
requests through the client's ``ApiClient`` (kubeconfig loading, TLS, bearer tokens and
exec-plugin refresh stay the client's job) and reads plain JSON. Every failure leaves this module
as a compat error:

===============================  ==========================================================
401, 403, 400, 422, other 4xx    Permanent (403 while a namespace's ServiceAccount is still
                                 being created, or while the namespace terminates: Transient)
404                              NotFound
409                              Conflict (a Permanent the adapter catches to adopt objects)
410, 429, 5xx, connection        Transient
errors, timeouts
bad kubeconfig / unknown context Permanent
===============================  ==========================================================
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from skyshift.compat.errors import CompatError, NotFound, Permanent, Transient, Unsupported

_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_HANDSHAKE = re.compile(r"Handshake status (\d{3})")


class Conflict(Permanent):
    """409: the object exists already (the adapter adopts it) or changed underneath."""


@dataclass
class KubeSettings:
    """A Kubernetes cluster's ``config`` in SkyShift (see the adapter's module docstring)."""

    kubeconfig: str | None = None  # None: $KUBECONFIG or ~/.kube/config
    context: str | None = None  # None: the context named like the cluster (see resolve_context)
    namespace: str = "skyshift"
    create_namespace: bool = True
    image: str = "busybox:1.36"  # for replicas without an image
    image_pull_policy: str = "IfNotPresent"
    annotations: dict[str, str] = field(default_factory=dict)  # added to every pod
    labels: dict[str, str] = field(default_factory=dict)  # the cluster's labels in ClusterState
    grace_period: int = 10  # seconds a deleted pod gets to stop
    request_timeout: float = 30.0
    watch: bool = True  # keep one pod watch open; False: every replicas() lists

    @classmethod
    def parse(cls, name: str, config: dict[str, Any]) -> KubeSettings:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known)
        try:
            if unknown:
                raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
            out = cls(**config)
            for key in ("kubeconfig", "context"):
                value = getattr(out, key)
                if value is not None and (not isinstance(value, str) or not value):
                    raise ValueError(f"{key} must be a non-empty string")
            if not isinstance(out.namespace, str) or not re.fullmatch(
                r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", out.namespace
            ):
                raise ValueError("namespace must be a DNS-1123 label")
            if out.image_pull_policy not in _PULL_POLICIES:
                raise ValueError(f"image_pull_policy must be one of {', '.join(_PULL_POLICIES)}")
            for key in ("annotations", "labels"):
                value = getattr(out, key)
                if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()
                ):
                    raise ValueError(f"{key} must map strings to strings")
            if isinstance(out.grace_period, bool) or not isinstance(out.grace_period, int) or (
                out.grace_period < 0
            ):
                raise ValueError("grace_period must be an integer >= 0")
            if not isinstance(out.request_timeout, int | float) or out.request_timeout <= 0:
                raise ValueError("request_timeout must be a number of seconds > 0")
        except (TypeError, ValueError) as exc:
            raise Permanent(f"kubernetes cluster {name}: {exc}") from exc
        return out


def list_contexts(kubeconfig: str | None = None) -> list[str]:
    """Context names of a kubeconfig (current context first), e.g. to attach every cluster."""
    try:
        contexts, current = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except (ConfigException, OSError, ValueError) as exc:
        raise Permanent(f"cannot read kubeconfig {kubeconfig or '(default)'}: {exc}") from exc
    names = [c["name"] for c in contexts or []]
    first = current["name"] if current else None
    return sorted(names, key=lambda n: (n != first, n))


def resolve_context(cluster: str, kubeconfig: str | None, context: str | None) -> str | None:
    """The context a cluster attached without one uses (None: the file's only context).

    The original SkyShift took the cluster's name as its context, so its users attach
    ``skyctl create cluster sim-k8s-2`` and expect the context ``sim-k8s-2``; taking the
    current context instead attached one physical cluster under several names (issue 31). So:
    a context named like the cluster; else the file's only context; else refuse to guess."""
    if context:
        return context
    names = list_contexts(kubeconfig)
    if cluster in names:
        return cluster
    if len(names) <= 1:
        return names[0] if names else None
    raise Permanent(
        f"kubernetes cluster {cluster}: kubeconfig {kubeconfig or '(default)'} has "
        f"{len(names)} contexts ({', '.join(names)}) and none is named {cluster}; "
        f"say which one with --context (spec.config.context)"
    )


def _status_message(body: bytes | str | None) -> tuple[str, str]:
    """(reason, message) of a Kubernetes Status body, or ('', text)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        status = json.loads(text)
        return str(status.get("reason") or ""), str(status.get("message") or text)
    except (ValueError, AttributeError):
        return "", text.strip()[:500]


def error_for_status(status: int, body: bytes | str | None, what: str) -> CompatError:
    """The compat error for an HTTP status from the API server."""
    reason, message = _status_message(body)
    text = f"{what}: HTTP {status}{' ' + reason if reason else ''}: {message}".rstrip(": ")
    if status == 404:
        return NotFound(text)
    if status == 409:
        return Conflict(text)
    if status in (410, 429) or status >= 500:
        return Transient(text)
    if status == 403 and (
        "error looking up service account" in message or "being terminated" in message
    ):
        return Transient(text)  # the namespace's ServiceAccount/termination catches up shortly
    if status == 405:
        return Unsupported(text)
    return Permanent(text)


def translate(exc: BaseException, what: str) -> CompatError:
    """Any client-side failure as a compat error (the caller chains ``exc``).

    A compat error comes back as it is: callers re-raise those before calling this, since
    ``raise translate(e) from e`` would make ``e`` its own cause.
    """
    if isinstance(exc, CompatError):
        return exc
    if isinstance(exc, ApiException):
        if exc.status:
            return error_for_status(int(exc.status), exc.body, what)
        reason = str(exc.reason or exc)
        if m := _HANDSHAKE.search(reason):  # websocket upgrade refused (exec)
            return error_for_status(int(m.group(1)), exc.body, what)
        if "CERTIFICATE_VERIFY_FAILED" in reason:
            return Permanent(f"{what}: TLS verification failed: {reason}")
        return Transient(f"{what}: {reason}")
    if isinstance(exc, ConfigException):
        return Permanent(f"{what}: kubeconfig: {exc}")
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return Transient(f"{what}: {type(exc).__name__}: {exc}")
    return Transient(f"{what}: unexpected {type(exc).__name__}: {exc}")


class KubeApi:
    """Raw JSON requests through one ``ApiClient`` (thread-safe; built on first use)."""

    def __init__(self, cluster: str, settings: KubeSettings, pool_size: int = 8) -> None:
        self.cluster = cluster
        self.settings = settings
        self.pool_size = pool_size  # pooled connections: one per thread that calls at once
        self._lock = threading.Lock()
        self._config: k8s_client.Configuration | None = None
        self._client: k8s_client.ApiClient | None = None

    def configuration(self) -> k8s_client.Configuration:
        with self._lock:
            if self._config is None:
                cfg = k8s_client.Configuration()
                context = resolve_context(self.cluster, self.settings.kubeconfig,
                                          self.settings.context)
                try:
                    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                        config_file=self.settings.kubeconfig,
                        context=context,
                        client_configuration=cfg,
                        persist_config=False,
                    )
                except (ConfigException, OSError, ValueError, TypeError) as exc:
                    where = self.settings.kubeconfig or "the default kubeconfig"
                    raise Permanent(
                        f"kubernetes cluster {self.cluster}: cannot load context "
                        f"{context or '(current)'} from {where}: {exc}"
                    ) from exc
                # fail fast and let Temporal retry; one quick retry covers stale keep-alives
                cfg.retries = urllib3.Retry(total=2, connect=2, read=1, status=0, redirect=0,
                                            backoff_factor=0.1)
                cfg.connection_pool_maxsize = self.pool_size
                self._config = cfg
            return self._config

    def client(self) -> k8s_client.ApiClient:
        cfg = self.configuration()
        with self._lock:
            if self._client is None:
                self._client = k8s_client.ApiClient(cfg)
            return self._client

    def new_client(self) -> k8s_client.ApiClient:
        """A private client (exec patches its client's request method while it runs)."""
        return k8s_client.ApiClient(self.configuration())

    def close(self) -> None:
        with self._lock:
            api, self._client = self._client, None
        if api is not None:
            api.close()  # type: ignore[no-untyped-call]

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None,
        body: Any,
        content_type: str | None,
        timeout: tuple[float, float],
    ) -> Any:
        api = self.client()
        headers = {"Accept": "application/json, */*"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return api.call_api(*params, _request_timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        *,
        content_type: str | None = None,
        what: str = "",
        text: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """One call; returns the decoded JSON (or text). Raises compat errors only."""
        label = f"kubernetes cluster {self.cluster}: {what or method + ' ' + path}"
        read_timeout = timeout or self.settings.request_timeout
        try:
            resp = self._send(method, path, query, body, content_type, (5.0, read_timeout))
            data = resp.read()
        except CompatError:
            raise  # already ours (e.g. a bad kubeconfig): chaining it to itself made a cycle
        except Exception as exc:
            raise translate(exc, label) from exc
        if not 200 <= resp.status < 300:
            raise error_for_status(resp.status, data, label)
        if text:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
        try:
            return json.loads(data) if data else {}
        except ValueError as exc:
            raise Transient(f"{label}: response is not JSON: {data[:200]!r}") from exc

    def open_watch(self, path: str, query: dict[str, str], timeout: float) -> Any:
        """Start a watch; returns the urllib3 response (iterate its lines, ``shutdown()`` it)."""
        label = f"kubernetes cluster {self.cluster}: watch {path}"
        try:
            resp = self._send("GET", path, {**query, "watch": "true"}, None, None, (5.0, timeout))
        except CompatError:
            raise
        except Exception as exc:
            raise translate(exc, label) from exc
        if not 200 <= resp.status < 300:
            raise error_for_status(resp.status, resp.read(), label)
        return resp.response
