"""Request dependencies: the store, the lifecycle, the caller and the authorization hook.

Every object route depends on :func:`authorize` (built per route with its action and kind), so
authentication and RBAC live here and in :mod:`skyshift.api.auth`, not in each route:

* :func:`current_user` turns the bearer token into a :class:`Principal` (401 otherwise);
* :func:`authorize` checks the route's action on its kind in the request's namespace: the
  ``{namespace}`` of the path, nothing for cluster-scoped kinds, or *every namespace* for the
  cross-namespace ``GET /{plural}`` of a namespaced kind;
* :func:`check_watch` adds ``watch`` for a list or get that streams: the route calls it with its
  parsed ``watch`` parameter, so the check and the handler read the query value the same way
  (``?watch=t`` is true for both, never a watch without the permission).

With auth switched off (``create_app(auth=False)``, tests only) everyone is an unrestricted
anonymous principal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fastapi import Depends, Request
from fastapi.security import OAuth2PasswordBearer

from skyshift.api.auth.audit import note
from skyshift.api.auth.service import ANONYMOUS_ADMIN, AuthService, Principal
from skyshift.api.errors import ApiError
from skyshift.api.lifecycle import Lifecycle
from skyshift.models.rbac import ALL_NAMESPACES
from skyshift.models.registry import KindInfo
from skyshift.models.schedule import OWNER_USER_ANNOTATION
from skyshift.store import ObjectStore, StoreError

__all__ = [
    "ANONYMOUS_ADMIN",
    "Principal",
    "authorize",
    "check_access",
    "check_role_grants",
    "check_role_replace",
    "check_watch",
    "current_user",
]

#: Reads ``Authorization: Bearer ...`` and gives the OpenAPI page its "Authorize" button.
bearer = OAuth2PasswordBearer(tokenUrl="token", auto_error=False)
#: set in the ASGI scope of a request that streams a watch (the metrics leave it out of latency)
WATCH_SCOPE_KEY = "skyshift.watch"


def get_auth(request: Request) -> AuthService | None:
    auth: AuthService | None = request.app.state.auth
    return auth


async def current_user(request: Request, token: str | None = Depends(bearer)) -> Principal:
    """The caller of this request: 401 without a valid token (when auth is on)."""
    auth = get_auth(request)
    if auth is None:
        return ANONYMOUS_ADMIN
    try:
        user = await auth.authenticate(token)
    except StoreError:
        # etcd is down (503): the record still names who asked, by the token's signature alone
        if (claimed := auth.token_user(token)) is not None:
            note(request, user=claimed, details={"identity": "token only (user store unavailable)"})
        raise
    note(request, user=user.name)
    request.state.principal = user
    return user


def request_namespace(request: Request, kind: KindInfo | None) -> str | None:
    """The namespace a request acts in: the path's, all of them, or None (cluster-scoped)."""
    if kind is None or not kind.namespaced:
        return None
    namespace = request.path_params.get("namespace")
    return namespace if isinstance(namespace, str) else ALL_NAMESPACES


async def check_access(
    request: Request, user: Principal, action: str, kind: KindInfo, namespace: str | None
) -> None:
    """Raise ApiError(403) when ``user`` may not do ``action`` on ``kind`` in ``namespace``."""
    auth = get_auth(request)
    if auth is not None:
        await auth.require(user, action, kind.plural, namespace)


async def check_watch(request: Request, kind: KindInfo) -> None:
    """403 unless the caller may also ``watch`` ``kind`` where the request acts; called by the
    list and get routes once their (typed) ``watch`` parameter is true."""
    auth = get_auth(request)
    who = getattr(request.state, "principal", None)
    if auth is not None:
        if not isinstance(who, Principal):  # the route's authorize() sets it; never fail open
            raise ApiError(401, "not authenticated")
        await auth.require(who, "watch", kind.plural, request_namespace(request, kind))
    request.scope[WATCH_SCOPE_KEY] = True


async def check_role_grants(request: Request, role: dict[str, Any]) -> None:
    """403 when the caller writes a Role granting more than it holds (no escalation)."""
    auth = get_auth(request)
    who = getattr(request.state, "principal", None)
    if auth is not None and isinstance(who, Principal):
        await auth.check_role_write(who, role)


async def check_role_replace(request: Request, current: dict[str, Any]) -> None:
    """403 when the caller overwrites or deletes a stored Role granting more than it holds."""
    auth = get_auth(request)
    who = getattr(request.state, "principal", None)
    if auth is not None and isinstance(who, Principal):
        await auth.check_role_replace(who, current)


def stamp_owner(request: Request, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
    """A Schedule's runs act for its owner (``OWNER_USER_ANNOTATION``): a create or replace
    makes the caller the owner; a patch (``current``: the stored schedule) keeps the owner and
    may not change it. Without auth there is nobody to check later: nothing is stamped."""
    who = getattr(request.state, "principal", None)
    if not isinstance(who, Principal) or who.unrestricted or get_auth(request) is None:
        return
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return  # the model refuses it later, naming the field
    notes = meta.setdefault("annotations", {})
    if not isinstance(notes, dict):
        return
    if current is None:
        notes[OWNER_USER_ANNOTATION] = who.name
        return
    stored = ((current.get("metadata") or {}).get("annotations") or {}).get(OWNER_USER_ANNOTATION)
    if notes.get(OWNER_USER_ANNOTATION) != stored:
        field = f"metadata.annotations.{OWNER_USER_ANNOTATION}"
        raise ApiError(
            422, f"{field} is set by the API: replace the schedule to own it", field=field
        )


async def check_spawns(request: Request, plurals: Iterable[str]) -> None:
    """403 unless the caller may create ``plurals`` in the namespace: what a Pipeline (its step
    Jobs) or a Schedule (Jobs, or Pipelines and their Jobs) will create (see
    :func:`skyshift.api.rules.spawned`). Their lifecycles create those with the control
    plane's rights, so holding the kind must not grant more than its creator has."""
    auth = get_auth(request)
    who = getattr(request.state, "principal", None)
    namespace = request.path_params.get("namespace")
    if auth is None or not isinstance(who, Principal) or not isinstance(namespace, str):
        return
    for plural in plurals:
        await auth.require(who, "create", plural, namespace)


def authorize(
    action: str | None, kind: KindInfo | None = None, *, audit_action: str | None = None
) -> Callable[..., Awaitable[Principal]]:
    """A dependency that checks ``action`` on ``kind`` where the request acts.

    ``action=None`` only authenticates (the route checks itself, e.g. apply: create or update).
    """

    async def dependency(request: Request, user: Principal = Depends(current_user)) -> Principal:
        namespace = request_namespace(request, kind)
        name = request.path_params.get("name")
        note(
            request,
            action=audit_action or action,
            resource=kind.plural if kind else None,
            namespace=None if namespace == ALL_NAMESPACES else namespace,
            name=name if isinstance(name, str) else None,
        )
        if kind is not None and action is not None:
            await check_access(request, user, action, kind, namespace)
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
