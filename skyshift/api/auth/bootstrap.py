"""First start: the default roles and the ``admin`` account, created once however many replicas
start at the same time.

Every object is written create-only, so concurrent replicas race harmlessly and later edits by
an admin are never overwritten. The admin password is random (never admin/admin); it is written
to a 0600 *pending* file before the account exists and renamed to the real file once this
replica's create won, so a crash in between loses nothing: the next start finds the pending
file, checks it against the stored hash and finishes the rename.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from pathlib import Path
from typing import Any

from skyshift.api import objects
from skyshift.api.auth import files
from skyshift.api.auth.passwords import Passwords
from skyshift.models.registry import API_KINDS, kind_info
from skyshift.store import ObjectStore
from skyshift.store.errors import AlreadyExists, Conflict, NotFound

log = logging.getLogger(__name__)

ADMIN = "admin"
READER = "reader"
INVITER = "inviter"

#: What ``reader`` may read: every object kind, but not users, invites or the audit trail.
READABLE = [k.plural for k in API_KINDS]

#: Kinds added since the first release, with the ``reader`` rules installs made before them
#: stored. A stored default role whose rules are still exactly one of these was never edited,
#: so it is brought up to date at start; an edited one is left alone.
_READ_ACTIONS = ["get", "list", "watch"]
_EARLIER_READABLE: list[list[str]] = [
    [k for k in READABLE if k not in ("pipelines", "schedules")],
]


def default_roles() -> list[dict[str, Any]]:
    def role(name: str, rules: list[dict[str, list[str]]], users: list[str]) -> dict[str, Any]:
        return {
            "kind": "Role",
            "metadata": {"name": name, "labels": {"skyshift.io/default-role": "true"}},
            "spec": {"rules": rules, "namespaces": ["*"], "users": users},
        }

    return [
        role(ADMIN, [{"resources": ["*"], "actions": ["*"]}], [ADMIN]),
        role(READER, [{"resources": READABLE, "actions": ["get", "list", "watch"]}], []),
        role(INVITER, [{"resources": ["users", "invites"], "actions": ["create"]}], []),
    ]


def new_user(name: str, password_hash: str, email: str = "") -> dict[str, Any]:
    """A validated User object ready for a create-only write."""
    data = {
        "kind": "User",
        "metadata": {"name": name},
        "spec": {"email": email, "passwordHash": password_hash},
    }
    return objects.prepare_create(kind_info("users"), data)


async def ensure_default_roles(store: ObjectStore) -> None:
    info = kind_info("roles")
    for manifest in default_roles():
        try:
            await store.create(info.plural, objects.prepare_create(info, manifest))
            log.info("created default role %s", manifest["metadata"]["name"])
        except AlreadyExists:
            await _upgrade_unedited(store, manifest)


def _rule_sets(rules: object) -> list[tuple[frozenset[str], frozenset[str]]] | None:
    if not isinstance(rules, list):
        return None
    out = []
    for rule in rules:
        if not isinstance(rule, dict):
            return None
        out.append((frozenset(rule.get("resources") or []), frozenset(rule.get("actions") or [])))
    return sorted(out, key=lambda r: (sorted(r[0]), sorted(r[1])))


def _earlier_defaults(name: str) -> list[list[dict[str, list[str]]]]:
    if name != READER:
        return []
    return [[{"resources": kinds, "actions": _READ_ACTIONS}] for kinds in _EARLIER_READABLE]


async def _upgrade_unedited(store: ObjectStore, manifest: dict[str, Any]) -> None:
    """Give a default role stored by an earlier release the rules of this one, when nobody
    edited it since (its rules are exactly an earlier default's). Compare-and-swap: a replica
    that loses the race, or an admin editing the role meanwhile, leaves it as it is."""
    name = manifest["metadata"]["name"]
    earlier = [_rule_sets(rules) for rules in _earlier_defaults(name)]
    if not earlier:
        return
    try:
        current = await store.get("roles", name)
    except NotFound:
        return
    labels = current.get("metadata", {}).get("labels") or {}
    rules = (current.get("spec") or {}).get("rules")
    if labels.get("skyshift.io/default-role") != "true" or _rule_sets(rules) not in earlier:
        return
    wanted = {**current, "spec": {**current["spec"], "rules": manifest["spec"]["rules"]}}
    updated, _ = objects.merge_update(kind_info("roles"), current, wanted)
    with contextlib.suppress(Conflict, NotFound):
        await store.update("roles", updated)
        log.info("default role %s now also grants the kinds added since it was stored", name)


def _pending(path: Path) -> Path:
    """A pending file of this attempt (unique: replicas may share the directory)."""
    return path.with_name(f"{path.name}.pending-{secrets.token_hex(4)}")


def _pendings(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.pending-*")) if path.parent.exists() else []


async def ensure_admin(store: ObjectStore, passwords: Passwords, password_file: Path) -> bool:
    """Create ``admin`` with a random password if no admin account exists; True if created."""
    try:
        current = await store.get("users", ADMIN)
    except NotFound:
        current = None
    if current is not None:
        _finish_pending(current, passwords, password_file)
        return False
    pending = _pending(password_file)
    password = "pw-" + secrets.token_urlsafe(24)  # never starts with "-" (a CLI option)
    files.write_replace(pending, (password + "\n").encode())
    try:
        await store.create("users", new_user(ADMIN, passwords.hash(password)))
    except AlreadyExists:  # another replica won: its password is the one
        pending.unlink(missing_ok=True)
        return False
    # A replica that started meanwhile may have finished this rename for us (same file).
    with contextlib.suppress(FileNotFoundError):
        pending.replace(password_file)
    log.info("created user admin; its password is in %s (mode 0600)", password_file)
    return True


def _finish_pending(current: dict[str, Any], passwords: Passwords, password_file: Path) -> None:
    """Rename the pending file whose password is the admin's (a crash after the create);
    the others belong to attempts that lost, so their passwords are void."""
    stored = str((current.get("spec") or {}).get("passwordHash") or "")
    for pending in _pendings(password_file):
        try:
            password = files.read_private(pending).decode().strip()
        except (OSError, UnicodeDecodeError, files.SecretFileError):
            continue
        if passwords.verify(stored, password):
            with contextlib.suppress(FileNotFoundError):  # its creator may rename it first
                pending.replace(password_file)
        else:
            pending.unlink(missing_ok=True)


def read_admin_password(password_file: Path) -> str | None:
    """The generated admin password (None when this machine has no password file)."""
    try:
        return files.read_private(password_file).decode().strip() or None
    except FileNotFoundError:
        return None
