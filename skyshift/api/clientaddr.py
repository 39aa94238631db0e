"""The client address of a request: the TCP peer, unless that peer is a trusted proxy.

The login throttle and the audit trail key on the client address, so whoever may set it can
dodge the one and forge the other. ``X-Forwarded-For`` is therefore believed only when the
connection comes from a proxy listed in ``SKYSHIFT_TRUSTED_PROXIES`` (comma-separated IPs or
CIDRs; default: none, so the header is ignored). The list is walked from the right, skipping
trusted proxies: the first address no trusted proxy vouches for is the client (entries to its
left were written by the client and prove nothing). uvicorn's own handling of the header (on by
default, trusting 127.0.0.1) is switched off by ``python -m skyshift.api``; this middleware
replaces it wherever the app is served.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

ENV = "SKYSHIFT_TRUSTED_PROXIES"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(value: str) -> tuple[Network, ...]:
    """``"10.0.0.1, 10.1.0.0/16"`` as networks; ValueError naming the bad entry."""
    out: list[Network] = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(
                f"{ENV}: {entry!r} is not an IP address or CIDR (e.g. 10.0.0.1 or 10.0.0.0/8)"
            ) from None
    return tuple(out)


def proxies_from_env() -> tuple[Network, ...]:
    return parse_proxies(os.environ.get(ENV, ""))


def _trusted(address: str, proxies: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(peer: str, forwarded_for: Iterable[str], proxies: tuple[Network, ...]) -> str:
    """Who the client is, given the peer and the ``X-Forwarded-For`` header values."""
    if not proxies or not _trusted(peer, proxies):
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer


class ClientAddressMiddleware:
    """Sets ``scope["client"]`` to :func:`client_address` for HTTP and websocket requests."""

    def __init__(self, app: ASGIApp, proxies: tuple[Network, ...] = ()) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.proxies:
            client = scope.get("client")
            peer = client[0] if client else ""
            values = [
                v.decode("latin-1")
                for k, v in scope.get("headers", [])
                if k.lower() == b"x-forwarded-for"
            ]
            address = client_address(peer, values, self.proxies)
            if address != peer:
                scope = dict(scope, client=(address, client[1] if client else 0))
        await self.app(scope, receive, send)
