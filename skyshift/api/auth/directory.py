"""Users and roles as the authorizer sees them: read from etcd, cached briefly per replica.

Every request needs its caller's account and the roles; reading both from etcd each time would
add two round trips to every call. A replica keeps them for ``ttl`` seconds and forgets them the
moment it changes a user or a role itself, so on one replica changes apply at once and across
replicas within ``ttl`` (default 1 s).
"""

from __future__ import annotations

import time
from typing import Any

from skyshift.store import ObjectStore
from skyshift.store.errors import NotFound

USERS = "users"
ROLES = "roles"
_MAX_CACHED_USERS = 10_000


class Directory:
    def __init__(self, store: ObjectStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        self._roles: tuple[float, list[dict[str, Any]]] | None = None
        self._users: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def invalidate(self) -> None:
        self._roles = None
        self._users.clear()

    async def roles(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        if self._roles is not None and self._roles[0] > now:
            return self._roles[1]
        items = (await self.store.list(ROLES)).items
        self._roles = (now + self.ttl, items)
        return items

    async def user(self, name: str) -> dict[str, Any] | None:
        """The stored user (with its password hash: never return it to a client), or None."""
        now = time.monotonic()
        hit = self._users.get(name)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            obj: dict[str, Any] | None = await self.store.get(USERS, name)
        except NotFound:
            obj = None
        if len(self._users) >= _MAX_CACHED_USERS:
            self._users.clear()
        self._users[name] = (now + self.ttl, obj)
        return obj
