"""Health checks for the stack's components, one function per kind of check.

Every check is quick (a second or two at most) and never raises: it answers healthy or not with a
short reason, which ``up`` shows while waiting and ``status`` prints.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx

from skyshift.config import EtcdTls
from skyshift.devstack.components import (
    Component,
    HttpHealth,
    ProcessHealth,
    TemporalHealth,
)

#: seconds one check may take: generous, since a one-shot `skyshift status` on a loaded machine
#: must not call a slow answer unhealthy (nothing listening fails at once: the port is tried first)
CHECK_TIMEOUT = 5.0
#: a Temporal check connects (an mTLS handshake and a system-info call) and then asks
TEMPORAL_CHECK_TIMEOUT = 10.0


@dataclass
class HealthResult:
    ok: bool
    detail: str = ""


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _client_tls(tls: EtcdTls) -> ssl.SSLContext:
    """Verify the server against ``tls.ca`` and show ``tls``'s client certificate."""
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.cert), str(tls.key))
    return context


def check_http(health: HttpHealth) -> HealthResult:
    try:
        verify: ssl.SSLContext | bool = _client_tls(health.tls) if health.tls else True
        resp = httpx.get(health.url, timeout=CHECK_TIMEOUT, verify=verify)
    except (httpx.HTTPError, OSError) as exc:  # ssl.SSLError is an OSError
        return HealthResult(False, f"GET {health.url}: {type(exc).__name__}")
    if resp.status_code != 200:
        return HealthResult(False, f"GET {health.url}: HTTP {resp.status_code}")
    if health.etcd_json:
        try:
            healthy = str(resp.json().get("health")).lower() == "true"
        except ValueError:
            healthy = False
        if not healthy:
            return HealthResult(False, f"GET {health.url}: {resp.text.strip()[:80]}")
    return HealthResult(True, "ok")


async def _temporal_search_attributes(health: TemporalHealth) -> set[str]:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    from skyshift.lifecycle.client import connect

    environ = dict(health.tls_env) if health.tls_env else None
    client = await connect(health.address, health.namespace, environ=environ)
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=health.namespace),
        timeout=timedelta(seconds=TEMPORAL_CHECK_TIMEOUT),
    )
    return set(resp.custom_attributes)


def check_temporal(health: TemporalHealth) -> HealthResult:
    host, _, port = health.address.rpartition(":")
    if not port_open(host, int(port)):
        return HealthResult(False, f"nothing listens on {health.address}")
    try:
        found = asyncio.run(
            asyncio.wait_for(_temporal_search_attributes(health), TEMPORAL_CHECK_TIMEOUT)
        )
    except Exception as exc:  # any failure just means "not healthy yet"
        why = (str(exc) or type(exc).__name__).splitlines()[0][:100]  # a timeout has no text
        return HealthResult(False, f"temporal {health.address}: {why}")
    missing = [a for a in health.search_attributes if a not in found]
    if missing:
        return HealthResult(False, f"search attributes not registered: {', '.join(missing)}")
    return HealthResult(True, "ok")


def check_process(health: ProcessHealth, started_at: float | None) -> HealthResult:
    """The caller has established the process is alive; ``started_at`` is its start (epoch s)."""
    if health.ready_file is not None:
        if health.ready_file.exists():
            return HealthResult(True, "ready")
        return HealthResult(False, f"waiting for {health.ready_file.name}")
    if started_at is not None and time.time() - started_at < health.settle:
        return HealthResult(False, "starting")
    return HealthResult(True, "alive")


def check(component: Component, started_at: float | None = None) -> HealthResult:
    """Run the component's own kind of check (liveness of its pid is checked by the caller)."""
    health = component.health
    if isinstance(health, HttpHealth):
        return check_http(health)
    if isinstance(health, TemporalHealth):
        return check_temporal(health)
    return check_process(health, started_at)
