"""Account calls of the API: log in, register, invites, users and the audit trail.

``login`` and ``register`` need no token (the password or the invite is the credential), so
they are plain functions of a server URL; the others act as a logged-in user through a
:class:`~skyshift.client.SkyShiftClient`. Passwords are sent in request bodies only, never in
URLs, and never kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from skyshift.client.base import DEFAULT_TIMEOUT, decode
from skyshift.client.client import SkyShiftClient
from skyshift.client.errors import ApiError, error_from_transport

USER_AGENT = {"User-Agent": "skyshift-client", "Accept": "application/json"}


@dataclass(frozen=True)
class Token:
    token: str
    expires_at: int
    expires_in: int


def _post(
    server: str, path: str, timeout: float, transport: httpx.BaseTransport | None, **kw: Any
) -> Any:
    url = server.rstrip("/")
    try:
        with httpx.Client(
            base_url=url, timeout=timeout, transport=transport, headers=USER_AGENT
        ) as http:
            return decode(http.post(path, **kw))
    except httpx.TransportError as exc:
        raise error_from_transport(exc, url) from exc


def login(
    server: str,
    username: str,
    password: str,
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
) -> Token:
    """A new bearer token for ``username`` (OAuth2 password form to ``POST /token``)."""
    data = _post(
        server,
        "/token",
        timeout,
        transport,
        data={"grant_type": "password", "username": username, "password": password},
    )
    if not isinstance(data, dict) or not isinstance(data.get("access_token"), str):
        raise ApiError(0, "BadResponse", "POST /token: expected an access_token")
    return Token(
        token=data["access_token"],
        expires_at=int(data.get("expires_at") or 0),
        expires_in=int(data.get("expires_in") or 0),
    )


def register(
    server: str,
    username: str,
    password: str,
    invite: str,
    email: str = "",
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Create an account with an invite; returns the new user (without any password)."""
    body = {"username": username, "password": password, "invite": invite, "email": email}
    data = _post(server, "/register_user", timeout, transport, json=body)
    return data if isinstance(data, dict) else {}


class AccountCalls:
    """The calls that need a logged-in user, over an existing client (its server and token)."""

    def __init__(self, client: SkyShiftClient) -> None:
        self.client = client

    def _obj(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        data = self.client._call(method, path, **kw)
        if not isinstance(data, dict):
            raise ApiError(0, "BadResponse", f"{method} {path}: expected a JSON object")
        return data

    def invite(self, roles: list[str]) -> dict[str, Any]:
        """``{"invite": secret, "roles": [...], "expires_in": seconds}``."""
        return self._obj("POST", "/invite", body={"roles": roles})

    def revoke_invite(self, invite: str) -> None:
        self._obj("POST", "/revoke_invite", body={"invite": invite})

    def users(self) -> dict[str, Any]:
        return self._obj("GET", "/users")

    def user(self, name: str) -> dict[str, Any]:
        return self._obj("GET", f"/users/{name}")

    def delete_user(self, name: str) -> dict[str, Any]:
        return self._obj("DELETE", f"/users/{name}")

    def audit(
        self, limit: int | None = None, user: str | None = None, cont: str | None = None
    ) -> dict[str, Any]:
        params = {k: str(v) for k, v in (("limit", limit), ("user", user), ("continue", cont)) if v}
        return self._obj("GET", "/audit", params=params)
