"""Routes of accounts and access: log in, register with an invite, invites, users, audit.

Users are kept apart from the object routes (no generic CRUD on them): nobody can write a
password hash through ``PUT``, and no response ever carries one. ``POST /token`` and
``POST /register_user`` are the only routes here that work without a token (the password, or
the invite, is the credential).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skyshift.api.auth import bootstrap, invites
from skyshift.api.auth.audit import ANONYMOUS, note
from skyshift.api.auth.passwords import password_problem
from skyshift.api.auth.service import AuthService, Principal, public_user
from skyshift.api.body import media_type, parse_json, read_bytes
from skyshift.api.deps import current_user, get_auth
from skyshift.api.errors import ApiError, from_validation
from skyshift.models.base import API_VERSION
from skyshift.models.rbac import roles_of
from skyshift.models.user import email_problem, validate_user_name
from skyshift.store.errors import AlreadyExists, NotFound

log = logging.getLogger(__name__)

router = APIRouter(tags=["Auth"])
MAX_AUTH_BODY = 16 * 1024

_TOKEN_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "required": ["username", "password"],
                    "properties": {
                        "grant_type": {"type": "string", "enum": ["password"]},
                        "username": {"type": "string"},
                        "password": {"type": "string", "format": "password"},
                    },
                }
            }
        },
    }
}


class RegisterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str
    password: str = Field(repr=False)
    invite: str = Field(repr=False)
    email: str = ""


class InviteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roles: list[str] = Field(default_factory=list, description="Roles the new user gets")


class RevokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    invite: str = Field(repr=False)


def _auth(request: Request) -> AuthService:
    auth = get_auth(request)
    if auth is None:
        raise ApiError(501, "this API server runs without authentication (test mode)")
    return auth


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _json_body(request: Request, model: type[BaseModel], what: str) -> Any:
    raw = await read_bytes(request, MAX_AUTH_BODY)
    try:
        return model.model_validate(parse_json(raw) if raw.strip() else {})
    except ValidationError as exc:
        raise from_validation(exc, what) from None


async def _credentials(request: Request) -> tuple[str, str]:
    """username and password from the OAuth2 password form (or a JSON object)."""
    raw = await read_bytes(request, MAX_AUTH_BODY)
    if media_type(request) == "application/json":
        data = parse_json(raw)
        fields = data if isinstance(data, dict) else {}
        grant = fields.get("grant_type", "password")
    else:
        try:
            form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise ApiError(400, "the login form is not UTF-8") from None
        fields = {k: v[0] for k, v in form.items() if v}
        grant = fields.get("grant_type") or "password"
    username, password = fields.get("username"), fields.get("password")
    if grant != "password":
        raise ApiError(400, "grant_type must be 'password'", field="grant_type")
    if not isinstance(username, str) or not username:
        raise ApiError(422, "username is required", field="username")
    if not isinstance(password, str) or not password:
        raise ApiError(422, "password is required", field="password")
    return username, password


@router.post(
    "/token",
    summary="Log in: exchange a user name and password for a bearer token",
    description="OAuth2 password form (`username`, `password`). The token expires "
    "(`expires_in` seconds); log in again for a new one. Repeated failures for a user or from "
    "an address get 429 with `Retry-After`.",
    openapi_extra=_TOKEN_DOC,
    responses={
        401: {"description": "Wrong user name or password"},
        429: {"description": "Too many failed logins"},
    },
)
async def token(request: Request) -> Any:
    auth = _auth(request)
    try:
        username, password = await _credentials(request)
    except ApiError as exc:  # a refused attempt still counts against its address
        if 400 <= exc.code < 500:
            auth.throttle.addresses.failed(_address(request))
        raise
    # Until the password proves the name, the actor is anonymous (malformed requests: no record).
    note(request, user=ANONYMOUS, action="login", resource="tokens")
    note(request, details={"claimedUser": username[:64]})
    issued = await auth.login(username, password, _address(request))
    note(request, user=username, details={})  # the password proved the name
    return JSONResponse(
        {
            "access_token": issued.token,
            "token_type": "bearer",
            "expires_in": issued.expires_in,
            "expires_at": issued.expires_at,
        },
        headers={"Cache-Control": "no-store"},
    )


@router.post(
    "/register_user",
    status_code=201,
    summary="Create an account with an invite",
    description="Body: `{username, password, invite, email?}`. The invite is used up; the new "
    "user gets the roles it names.",
)
async def register_user(request: Request) -> Any:
    auth = _auth(request)
    address = _address(request)
    if wait := auth.registrations.retry_after(address):
        raise ApiError(
            429,
            f"too many failed registrations from this address: try again in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    try:
        created = await _register(request, auth)
    except ApiError as exc:
        if 400 <= exc.code < 500:
            auth.registrations.failed(address)
        raise
    name = str(created["metadata"]["name"])
    note(request, user=name)  # the invite proved the right to this name
    return JSONResponse(public_user(created, await auth.roles_of(name)), status_code=201)


async def _register(request: Request, auth: AuthService) -> dict[str, Any]:
    body: RegisterRequest = await _json_body(request, RegisterRequest, "registration")
    try:
        validate_user_name(body.username, "username")
    except ValueError as exc:
        raise ApiError(422, str(exc), field="username") from None
    if problem := password_problem(body.password):
        raise ApiError(422, problem, field="password")
    if body.email and (problem := email_problem(body.email)):
        raise ApiError(
            400, f"email {body.email[:100]!r} is not an e-mail address: {problem}", field="email"
        )
    # Until the invite is used, the actor is anonymous (malformed requests: no record).
    note(request, user=ANONYMOUS, action="register", resource="users", name=body.username)
    invite = await invites.find(auth.store, body.invite)
    roles, inviter = invites.roles_of(invite), invites.inviter_of(invite)
    note(request, details={"roles": roles, "invitedBy": inviter})
    await _check_inviter_still_may(auth, inviter, roles)
    if await auth.directory.user(body.username) is not None:
        raise ApiError(409, f"user {body.username} already exists", reason="AlreadyExists")
    password_hash = await asyncio.to_thread(auth.passwords.hash, body.password)
    user = bootstrap.new_user(body.username, password_hash, body.email)
    await invites.consume(auth.store, invite)
    try:
        created = await auth.store.create("users", user)
    except AlreadyExists:
        await invites.restore(auth.store, invite)
        raise ApiError(
            409, f"user {body.username} already exists", reason="AlreadyExists"
        ) from None
    except BaseException:
        await invites.restore(auth.store, invite)
        raise
    for role in roles:
        await _add_member(auth, role, body.username)
    auth.directory.invalidate()
    return created


async def _check_inviter_still_may(auth: AuthService, inviter: str, roles: list[str]) -> None:
    """An invite grants no more than its creator could grant *now* (it may have lost roles)."""
    user = await auth.directory.user(inviter)
    if user is None:
        raise ApiError(403, "invalid invite: the user who made it no longer exists")
    who = Principal(name=inviter, uid=str(user["metadata"].get("uid") or ""))
    if missing := await auth.ungrantable(who, roles):
        raise ApiError(403, f"invalid invite: its creator may no longer grant {', '.join(missing)}")


async def _add_member(auth: AuthService, role: str, username: str) -> None:
    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        spec = obj.setdefault("spec", {})
        users = list(spec.get("users") or [])
        if username in users:
            return None
        spec["users"] = [*users, username]
        return obj

    try:
        await auth.store.guaranteed_update("roles", role, None, mutate)
    except NotFound:
        log.warning("role %s of a new user's invite no longer exists", role)


async def _remove_member(auth: AuthService, role: str, username: str) -> None:
    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        spec = obj.setdefault("spec", {})
        users = list(spec.get("users") or [])
        if username not in users:
            return None
        spec["users"] = [u for u in users if u != username]
        return obj

    with contextlib.suppress(NotFound):
        await auth.store.guaranteed_update("roles", role, None, mutate)


@router.post(
    "/invite",
    status_code=201,
    summary="Create a single-use invite",
    description="Body: `{roles: [...]}`. Needs `create` on `invites`, and only roles you hold "
    "yourself (or any, if you may update roles) can be granted. The secret is shown once.",
)
async def create_invite(request: Request, user: Principal = Depends(current_user)) -> Any:
    auth = _auth(request)
    body: InviteRequest = await _json_body(request, InviteRequest, "invite")
    roles = sorted(set(body.roles))
    note(request, action="invite", resource="invites", details={"roles": roles})
    await auth.require(user, "create", "invites", None)
    known = {str(r["metadata"]["name"]) for r in await auth.directory.roles()}
    if unknown := [r for r in roles if r not in known]:
        raise ApiError(404, f"no such role: {', '.join(unknown)}", field="roles")
    if missing := await auth.ungrantable(user, roles):
        raise ApiError(
            403,
            f"forbidden: user {user.name} may only grant roles it holds; not {', '.join(missing)}",
            field="roles",
        )
    ttl = int(auth.config.invite_ttl_hours * 3600)
    secret = await invites.create(auth.store, user.name, roles, ttl)
    return JSONResponse({"invite": secret, "roles": roles, "expires_in": ttl}, status_code=201)


@router.post(
    "/revoke_invite",
    summary="Revoke an unused invite",
    description="Body: `{invite}`. Its creator, or whoever may delete invites, can revoke it.",
)
async def revoke_invite(request: Request, user: Principal = Depends(current_user)) -> Any:
    auth = _auth(request)
    body: RevokeRequest = await _json_body(request, RevokeRequest, "revoke request")
    note(request, action="revoke_invite", resource="invites")
    try:
        invite = await auth.store.get(invites.INVITES, invites.invite_key(body.invite))
    except NotFound:
        raise ApiError(404, "no such invite (already used, revoked or expired)") from None
    if invites.inviter_of(invite) != user.name:
        await auth.require(user, "delete", "invites", None)
    try:
        await auth.store.delete(invites.INVITES, invite["metadata"]["name"])
    except NotFound:
        raise ApiError(404, "no such invite (already used, revoked or expired)") from None
    return {"revoked": True}


@router.get(
    "/users",
    summary="List users",
    description="Everyone may see their own account; `list` on `users` shows all of them.",
)
async def list_users(request: Request, user: Principal = Depends(current_user)) -> Any:
    auth = _auth(request)
    roles = await auth.directory.roles()
    if await auth.allowed(user, "list", "users", None):
        result = await auth.store.list("users")
        items, rv = result.items, result.resource_version
    else:
        own = await auth.directory.user(user.name)
        items, rv = ([own] if own else []), str(await auth.store.revision())
    return {
        "apiVersion": API_VERSION,
        "kind": "UserList",
        "metadata": {"resourceVersion": rv, "continue": None},
        "items": [public_user(u, roles_of(roles, u["metadata"]["name"])) for u in items],
    }


@router.get("/users/{name}", summary="Get a user (your own, or any with `get` on `users`)")
async def get_user(request: Request, name: str, user: Principal = Depends(current_user)) -> Any:
    auth = _auth(request)
    if name != user.name:
        await auth.require(user, "get", "users", None)
    try:
        obj = await auth.store.get("users", name)
    except NotFound:
        raise ApiError(404, f"User {name} not found") from None
    return public_user(obj, await auth.roles_of(name))


@router.delete(
    "/users/{name}",
    summary="Delete a user",
    description="Needs `delete` on `users`. The user's tokens stop working and it leaves every "
    "role, so a later account of the same name inherits nothing.",
)
async def delete_user(request: Request, name: str, user: Principal = Depends(current_user)) -> Any:
    auth = _auth(request)
    note(request, action="delete", resource="users", name=name)
    await auth.require(user, "delete", "users", None)
    if name == user.name:
        raise ApiError(409, "you cannot delete your own account")
    try:
        deleted = await auth.store.delete("users", name)
    except NotFound:
        raise ApiError(404, f"User {name} not found") from None
    for role in roles_of((await auth.store.list("roles")).items, name):
        await _remove_member(auth, role, name)
    auth.directory.invalidate()
    return public_user(deleted, [])


@router.get(
    "/audit",
    summary="The audit trail (newest first)",
    description="Every mutation with who, what, when and the result. Needs `list` on `audit`.",
)
async def list_audit(
    request: Request,
    user: Principal = Depends(current_user),
    limit: int | None = Query(100, ge=1, le=10_000, description="Page size"),
    cont: str | None = Query(None, alias="continue", description="Token from the previous page"),
    who: str | None = Query(None, alias="user", description="Only records of this user"),
) -> Any:
    auth = _auth(request)
    await auth.require(user, "list", "audit", None)
    items, token = await auth.audit.list(limit, cont, who)
    return {"kind": "AuditList", "metadata": {"continue": token}, "items": items}
