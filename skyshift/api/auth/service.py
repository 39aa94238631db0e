"""The auth layer of one API server: tokens, accounts, roles, throttling and the audit log.

Built by ``create_app`` (``app.state.auth``) unless auth is switched off for a test. The route
dependencies in :mod:`skyshift.api.deps` and the auth routes call into it; it holds no state that
matters across replicas except the in-memory login throttle (see :mod:`.throttle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skyshift.api.auth import bootstrap, files
from skyshift.api.auth.audit import AuditLog
from skyshift.api.auth.config import AuthConfig
from skyshift.api.auth.directory import Directory
from skyshift.api.auth.passwords import Passwords
from skyshift.api.auth.throttle import LoginThrottle, Throttle
from skyshift.api.auth.tokens import InvalidToken, IssuedToken, TokenIssuer
from skyshift.api.errors import ApiError
from skyshift.models import rbac
from skyshift.store import ObjectStore, StoreError

log = logging.getLogger(__name__)

NOT_LOGGED_IN = "authentication required: send `Authorization: Bearer <token>` (POST /token)"
BEARER = {"WWW-Authenticate": "Bearer"}
BOOTSTRAP_RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class Principal:
    """Who is calling: an account (``uid`` tells its incarnation) or, with auth off, everyone."""

    name: str
    uid: str = ""
    unrestricted: bool = False


ANONYMOUS_ADMIN = Principal(name="anonymous", unrestricted=True)


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers=BEARER)


def describe_scope(resource: str, namespace: str | None) -> str:
    if namespace is None:
        return resource
    if namespace == rbac.ALL_NAMESPACES:
        return f"{resource} across all namespaces (name one with --namespace)"
    return f"{resource} in namespace {namespace}"


class AuthService:
    def __init__(self, store: ObjectStore, config: AuthConfig) -> None:
        self.config = config
        self.store = store
        self.tokens = TokenIssuer(
            files.load_or_create_key(config.key_file), config.token_ttl_seconds
        )
        self.passwords = Passwords(config.argon2_time_cost, config.argon2_memory_kib)
        self.directory = Directory(store, config.cache_seconds)
        self.throttle = LoginThrottle(
            config.max_failures_per_user_total,
            config.max_failures_per_address,
            config.throttle_window,
            per_user_address=config.max_failures_per_user,
        )
        #: Failed registrations per client address (they cost an etcd read and a log line).
        self.registrations = Throttle(config.max_failures_per_address, config.throttle_window)
        self.audit = AuditLog(store, config.audit_retention_days)
        self.ready = False
        self._retry: asyncio.Task[None] | None = None

    # -- first start ----------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Default roles and the admin account (create-only: safe on every start)."""
        await bootstrap.ensure_default_roles(self.store)
        await bootstrap.ensure_admin(self.store, self.passwords, self.config.admin_password_file)
        self.directory.invalidate()
        self.ready = True

    async def start(self) -> None:
        """Bootstrap now, or keep retrying in the background while etcd is away."""
        try:
            await self.bootstrap()
        except StoreError as exc:
            log.warning("auth bootstrap postponed (%s); retrying in the background", exc)
            self._retry = asyncio.create_task(self._retry_bootstrap())

    async def _retry_bootstrap(self) -> None:
        while not self.ready:
            await asyncio.sleep(BOOTSTRAP_RETRY_SECONDS)
            with contextlib.suppress(StoreError):
                await self.bootstrap()

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._retry

    # -- who is calling -------------------------------------------------------------------------

    async def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise unauthorized(NOT_LOGGED_IN)
        try:
            claims = self.tokens.verify(token)
        except InvalidToken as exc:
            raise unauthorized(f"{exc}: log in again (POST /token)") from None
        user = await self.directory.user(claims.username)
        if user is None or (user.get("metadata") or {}).get("uid") != claims.uid:
            raise unauthorized("the token's user no longer exists: log in again (POST /token)")
        return Principal(name=claims.username, uid=claims.uid)

    def token_user(self, token: str | None) -> str | None:
        """The user a token was signed for, without asking the directory (None: no valid
        token). Only for the audit record of a request the directory could not answer."""
        if not token:
            return None
        try:
            return self.tokens.verify(token).username
        except InvalidToken:
            return None

    # -- what it may do -------------------------------------------------------------------------

    async def allowed(
        self, who: Principal, action: str, resource: str, namespace: str | None
    ) -> bool:
        if who.unrestricted:
            return True
        return rbac.allowed(await self.directory.roles(), who.name, action, resource, namespace)

    async def require(
        self, who: Principal, action: str, resource: str, namespace: str | None
    ) -> None:
        if not await self.allowed(who, action, resource, namespace):
            raise ApiError(
                403,
                f"forbidden: user {who.name} may not {action} "
                f"{describe_scope(resource, namespace)}",
            )

    async def roles_of(self, username: str) -> list[str]:
        return rbac.roles_of(await self.directory.roles(), username)

    async def ungrantable(self, who: Principal, roles: Iterable[str]) -> list[str]:
        """The roles in ``roles`` that ``who`` could not grant itself: it may grant a role it is
        a member of, or one granting nothing it does not hold (unknown roles: ungrantable)."""
        if who.unrestricted:
            return []
        everything = await self.directory.roles()
        by_name = {rbac.role_name(r): r for r in everything}

        def grantable(role: dict[str, Any] | None) -> bool:
            if role is None:
                return False
            spec = role.get("spec") or {}
            return rbac.is_member(role, who.name) or not rbac.missing_grants(
                everything, who.name, spec
            )

        return sorted({name for name in roles if not grantable(by_name.get(name))})

    async def check_role_write(self, who: Principal, role: dict[str, Any]) -> None:
        """403 unless ``who`` holds everything the role it writes would grant."""
        await self._check_grants(who, role, "write a role granting more than it holds")

    async def check_role_replace(self, who: Principal, current: dict[str, Any]) -> None:
        """403 unless ``who`` holds everything the stored role grants: nobody may overwrite or
        delete a role they could not have written (e.g. empty out ``admin``)."""
        what = f"change or delete role {rbac.role_name(current)}, which grants more than it holds"
        await self._check_grants(who, current, what)

    async def _check_grants(self, who: Principal, role: dict[str, Any], what: str) -> None:
        """403 (``who`` may not ``what``) unless ``who`` holds everything ``role`` grants."""
        if who.unrestricted:
            return
        spec = role.get("spec") if isinstance(role.get("spec"), dict) else {}
        missing = rbac.missing_grants(await self.directory.roles(), who.name, spec or {})
        if missing:
            raise ApiError(
                403,
                f"forbidden: user {who.name} may not {what} "
                f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})",
                field="spec.rules",
            )

    # -- logging in ----------------------------------------------------------------------------

    async def login(self, username: str, password: str, address: str) -> IssuedToken:
        wait = self.throttle.retry_after(username, address)
        if wait:
            raise ApiError(
                429,
                f"too many failed logins: try again in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        user = await self.directory.user(username) if _plausible(username) else None
        stored = str(((user or {}).get("spec") or {}).get("passwordHash") or "") or None
        ok = await asyncio.to_thread(self.passwords.verify, stored, password)
        if not ok or user is None:
            self.throttle.failed(username, address)
            log.info("failed login for %r from %s", username[:64], address)
            raise ApiError(
                401, "invalid username or password", reason="LoginFailed", headers=BEARER
            )
        self.throttle.succeeded(username, address)
        return self.tokens.issue(username, str(user["metadata"].get("uid") or ""))


def _plausible(username: str) -> bool:
    return 0 < len(username) <= 63 and "/" not in username


def public_user(obj: dict[str, Any], roles: list[str]) -> dict[str, Any]:
    """A user as clients see it: never the password hash."""
    spec = obj.get("spec") or {}
    return {
        "apiVersion": obj.get("apiVersion", "skyshift.io/v1"),
        "kind": "User",
        "metadata": obj.get("metadata") or {},
        "spec": {"email": str(spec.get("email") or "")},
        "status": {"roles": ",".join(roles)},
    }
