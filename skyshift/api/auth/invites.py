"""Invites: single-use, expiring, revocable secrets that let someone register an account.

Only a SHA-256 of the secret is stored (it is the key of the invite), so etcd never holds a
usable invite. Registering consumes the invite with a compare-and-swap delete, so two people
racing with one invite cannot both succeed; if the account cannot be created afterwards the
invite is put back.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from typing import Any

from skyshift.api.errors import ApiError
from skyshift.models.meta import now_iso
from skyshift.store import ObjectStore
from skyshift.store.errors import AlreadyExists, Conflict, NotFound

INVITES = "invites"


def invite_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def create(store: ObjectStore, inviter: str, roles: list[str], ttl_seconds: int) -> str:
    """Store a new invite and return its secret (shown once, never stored)."""
    secret = "inv-" + secrets.token_urlsafe(32)  # never starts with "-" (a CLI option)
    obj = {
        "kind": "Invite",
        "metadata": {"name": invite_key(secret), "creationTimestamp": now_iso()},
        "spec": {"roles": roles, "createdBy": inviter, "expiresAt": int(time.time()) + ttl_seconds},
    }
    await store.create(INVITES, obj)
    return secret


async def find(store: ObjectStore, secret: str) -> dict[str, Any]:
    """The live invite for ``secret``; 403 for unknown, used, revoked or expired ones alike."""
    invalid = ApiError(403, "invalid invite: unknown, already used, revoked or expired")
    if not secret or len(secret) > 256:
        raise invalid
    try:
        obj = await store.get(INVITES, invite_key(secret))
    except NotFound:
        raise invalid from None
    if int((obj.get("spec") or {}).get("expiresAt") or 0) <= time.time():
        meta = obj["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await store.delete(INVITES, meta["name"], expected_rv=meta["resourceVersion"])
        raise invalid
    return obj


async def consume(store: ObjectStore, invite: dict[str, Any]) -> None:
    """Delete the invite if nobody else used it meanwhile; 403 if somebody did."""
    meta = invite["metadata"]
    try:
        await store.delete(INVITES, meta["name"], expected_rv=meta["resourceVersion"])
    except (NotFound, Conflict):
        raise ApiError(403, "invalid invite: unknown, already used, revoked or expired") from None


async def restore(store: ObjectStore, invite: dict[str, Any]) -> None:
    """Put a consumed invite back (its registration failed)."""
    meta = {k: v for k, v in invite["metadata"].items() if k != "resourceVersion"}
    with contextlib.suppress(AlreadyExists):
        await store.create(INVITES, {**invite, "metadata": meta})


def roles_of(invite: dict[str, Any]) -> list[str]:
    roles = (invite.get("spec") or {}).get("roles") or []
    return [r for r in roles if isinstance(r, str)]


def inviter_of(invite: dict[str, Any]) -> str:
    return str((invite.get("spec") or {}).get("createdBy") or "")
