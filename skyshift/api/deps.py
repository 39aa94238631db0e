"""Request dependencies: the store, the lifecycle, the caller and the authorization hook.

Authentication and RBAC come later; every object route already depends on :func:`authorize`
(built per route with its action and kind), so adding auth means changing :func:`current_user`
and :func:`check_access` here, not touching each route.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, Request

from skyshift.api.lifecycle import Lifecycle
from skyshift.models.registry import KindInfo
from skyshift.store import ObjectStore


@dataclass(frozen=True)
class Principal:
    """Who is calling. Until auth lands everyone is an anonymous admin."""

    name: str
    roles: tuple[str, ...] = field(default=())

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


ANONYMOUS_ADMIN = Principal(name="anonymous", roles=("admin",))


async def current_user(request: Request) -> Principal:
    """The caller of this request (the auth issue replaces this with token checks)."""
    return ANONYMOUS_ADMIN


def check_access(
    user: Principal, action: str, kind: KindInfo | None, namespace: str | None
) -> None:
    """Raise ApiError(403) when ``user`` may not do ``action``; everything is allowed for now."""
    return None


def authorize(action: str, kind: KindInfo | None = None) -> Callable[..., Awaitable[Principal]]:
    """A dependency that checks ``action`` on ``kind`` in the request's namespace."""

    async def dependency(request: Request, user: Principal = Depends(current_user)) -> Principal:
        namespace = request.path_params.get("namespace")
        check_access(user, action, kind, namespace)
        return user

    return dependency


def get_store(request: Request) -> ObjectStore:
    store: ObjectStore = request.app.state.store
    return store


def get_lifecycle(request: Request) -> Lifecycle | None:
    lifecycle: Lifecycle | None = request.app.state.lifecycle
    return lifecycle


def get_options(request: Request) -> Any:
    return request.app.state.options
