"""The pure parts of auth: tokens, password hashes, role decisions, throttling, secret files."""

from __future__ import annotations

import base64
import json
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import pytest

from skyshift.api.auth import files
from skyshift.api.auth.bootstrap import default_roles
from skyshift.api.auth.passwords import Passwords, password_problem
from skyshift.api.auth.throttle import LoginThrottle
from skyshift.api.auth.tokens import InvalidToken, TokenIssuer
from skyshift.models import rbac

KEY = b"k" * 64


# --- tokens ----------------------------------------------------------------------------------


def test_token_round_trip_and_expiry_in_hours() -> None:
    issuer = TokenIssuer(KEY, 12 * 3600)
    issued = issuer.issue("alice", "uid-1")
    claims = issuer.verify(issued.token)
    assert (claims.username, claims.uid) == ("alice", "uid-1")
    assert issued.expires_in == 12 * 3600
    assert abs(issued.expires_at - (time.time() + 12 * 3600)) < 5


def test_each_login_gets_a_new_token() -> None:
    issuer = TokenIssuer(KEY, 3600)
    assert issuer.issue("a", "u").token != issuer.issue("a", "u").token


def test_expired_token_is_refused() -> None:
    issuer = TokenIssuer(KEY, 3600)
    old = issuer.issue("alice", "u", ttl_seconds=-60)  # expired a minute ago (> leeway)
    with pytest.raises(InvalidToken, match="token expired"):
        issuer.verify(old.token)


def _tamper(token: str, **changes: object) -> str:
    header, payload, sig = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data.update(changes)
    raw = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{header}.{raw}.{sig}"


def test_tampered_token_is_refused() -> None:
    issuer = TokenIssuer(KEY, 3600)
    token = issuer.issue("alice", "u").token
    with pytest.raises(InvalidToken, match="invalid token"):
        issuer.verify(_tamper(token, sub="admin"))
    with pytest.raises(InvalidToken):
        issuer.verify(_tamper(token, exp=int(time.time()) + 10**8))
    with pytest.raises(InvalidToken):
        issuer.verify(token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB"))
    with pytest.raises(InvalidToken):
        issuer.verify("not-a-jwt")


def test_token_signed_with_another_key_is_refused() -> None:
    other = TokenIssuer(b"o" * 64, 3600).issue("alice", "u").token
    with pytest.raises(InvalidToken):
        TokenIssuer(KEY, 3600).verify(other)


def test_alg_none_and_missing_claims_are_refused() -> None:
    now = int(time.time())
    unsigned = jwt.encode(
        {"iss": "skyshift", "sub": "admin", "uid": "u", "iat": now, "exp": now + 60},
        key=None,
        algorithm="none",
    )
    with pytest.raises(InvalidToken):
        TokenIssuer(KEY, 3600).verify(unsigned)
    no_exp = jwt.encode({"iss": "skyshift", "sub": "a", "uid": "u", "iat": now}, KEY, "HS256")
    with pytest.raises(InvalidToken):
        TokenIssuer(KEY, 3600).verify(no_exp)
    other_issuer = jwt.encode(
        {"iss": "x", "sub": "a", "uid": "u", "iat": now, "exp": now + 60}, KEY, "HS256"
    )
    with pytest.raises(InvalidToken):
        TokenIssuer(KEY, 3600).verify(other_issuer)


# --- passwords -------------------------------------------------------------------------------


def test_passwords_are_argon2_hashes() -> None:
    pw = Passwords(time_cost=1, memory_kib=8192)
    encoded = pw.hash("s3cret-password")
    assert encoded.startswith("$argon2id$") and "s3cret-password" not in encoded
    assert pw.verify(encoded, "s3cret-password")
    assert not pw.verify(encoded, "wrong-password")
    assert not pw.verify(None, "s3cret-password")  # unknown user: same cost, never true
    assert not pw.verify("garbage", "x")


def test_password_policy() -> None:
    assert password_problem("short") is not None
    assert password_problem("long enough") is None


# --- roles -----------------------------------------------------------------------------------


def role(users: list[str], namespaces: list[str], resources: list[str], actions: list[str]) -> dict:
    return {
        "metadata": {"name": "r"},
        "spec": {
            "users": users,
            "namespaces": namespaces,
            "rules": [{"resources": resources, "actions": actions}],
        },
    }


def test_rbac_namespaces_and_wildcards() -> None:
    roles = [role(["ed"], ["team-a"], ["job"], ["*"])]  # a kind alias normalises to "jobs"
    assert rbac.allowed(roles, "ed", "create", "jobs", "team-a")
    assert not rbac.allowed(roles, "ed", "create", "jobs", "team-b")
    assert not rbac.allowed(roles, "ed", "list", "jobs", rbac.ALL_NAMESPACES)
    assert not rbac.allowed(roles, "ed", "get", "services", "team-a")
    assert not rbac.allowed(roles, "someone", "get", "jobs", "team-a")
    everywhere = [role(["ed"], ["*"], ["jobs"], ["list"])]
    assert rbac.allowed(everywhere, "ed", "list", "jobs", rbac.ALL_NAMESPACES)
    assert not rbac.allowed(everywhere, "ed", "delete", "jobs", "team-a")


def test_rbac_cluster_scoped_resources_ignore_namespaces() -> None:
    roles = [role(["c"], [], ["clusters"], ["get"])]
    assert rbac.allowed(roles, "c", "get", "clusters", None)
    assert not rbac.allowed(roles, "c", "get", "jobs", "default")  # no namespaces: none


def test_rbac_create_is_not_delete() -> None:
    creator = [role(["c"], ["*"], ["jobs"], ["create"])]
    assert rbac.allowed(creator, "c", "create", "jobs", "default")
    assert not rbac.allowed(creator, "c", "delete", "jobs", "default")
    deleter = [role(["d"], ["*"], ["jobs"], ["delete"])]
    assert not rbac.allowed(deleter, "d", "create", "jobs", "default")


def test_rbac_ignores_malformed_roles() -> None:
    junk = [{"spec": "x"}, {"spec": {"users": "ed", "rules": ["x"]}}, {}]
    assert not rbac.allowed(junk, "ed", "get", "jobs", "default")  # type: ignore[arg-type]


def test_default_roles() -> None:
    roles = {r["metadata"]["name"]: r for r in default_roles()}
    assert set(roles) == {"admin", "reader", "inviter"}
    everything = list(roles.values())
    assert rbac.allowed(everything, "admin", "delete", "users", None)
    assert rbac.allowed(everything, "admin", "list", "audit", None)
    reader = [dict(roles["reader"], spec={**roles["reader"]["spec"], "users": ["r"]})]
    assert rbac.allowed(reader, "r", "watch", "jobs", rbac.ALL_NAMESPACES)
    assert not rbac.allowed(reader, "r", "create", "jobs", "default")
    assert not rbac.allowed(reader, "r", "list", "users", None)  # users are not "objects"
    assert not rbac.allowed(reader, "r", "list", "audit", None)
    inviter = [dict(roles["inviter"], spec={**roles["inviter"]["spec"], "users": ["i"]})]
    assert rbac.allowed(inviter, "i", "create", "invites", None)
    assert not rbac.allowed(inviter, "i", "get", "jobs", "default")


# --- throttling ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_per_user_and_window() -> None:
    clock = Clock()
    t = LoginThrottle(per_user=3, per_address=100, window=60, clock=clock)
    for _ in range(3):
        assert t.retry_after("alice", "1.1.1.1") == 0
        t.failed("alice", "1.1.1.1")
        clock.now += 1
    wait = t.retry_after("alice", "2.2.2.2")  # another address does not help
    assert 55 <= wait <= 60
    assert t.retry_after("bob", "1.1.1.1") == 0  # other users are not locked out
    clock.now += wait
    assert t.retry_after("alice", "1.1.1.1") == 0  # the oldest failure left the window


def test_throttle_per_address_and_success_resets_only_the_user() -> None:
    clock = Clock()
    t = LoginThrottle(per_user=100, per_address=3, window=60, clock=clock)
    for name in ("a", "b", "c"):
        t.failed(name, "6.6.6.6")
    assert t.retry_after("d", "6.6.6.6") > 0  # guessing many names from one address
    assert t.retry_after("d", "7.7.7.7") == 0
    t.succeeded("a")
    assert t.retry_after("a", "6.6.6.6") > 0  # the address budget is not reset


# --- secret files ----------------------------------------------------------------------------


def test_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "auth" / "jwt.key"
    key = files.load_or_create_key(path)
    assert len(key) >= 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert files.load_or_create_key(path) == key


def test_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jwt.key"
    files.load_or_create_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(files.SecretFileError, match="readable by other users"):
        files.load_or_create_key(path)


def test_loose_auth_dir_is_tightened(tmp_path: Path) -> None:
    d = tmp_path / "auth"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    files.ensure_private_dir(d)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_replicas_starting_at_once_share_one_complete_key(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "jwt.key"
    with ThreadPoolExecutor(16) as pool:
        keys = list(pool.map(lambda _: files.load_or_create_key(path), range(64)))
    assert len(set(keys)) == 1 and len(keys[0]) == 2 * files.KEY_BYTES
    assert [p.name for p in path.parent.iterdir()] == ["jwt.key"]  # no temporary files left


def test_missing_grants_blocks_escalation() -> None:
    holder = [
        role(["w"], ["default"], ["jobs"], ["get", "list"]),
        role(["w"], [], ["roles"], ["create"]),
    ]
    ok = {"rules": [{"resources": ["job"], "actions": ["get"]}], "namespaces": ["default"]}
    assert rbac.missing_grants(holder, "w", ok) == []
    more = {
        "rules": [{"resources": ["jobs"], "actions": ["get", "delete"]}],
        "namespaces": ["default", "prod"],
    }
    assert rbac.missing_grants(holder, "w", more) == [
        "delete jobs in default",
        "delete jobs in prod",
        "get jobs in prod",
    ]
    everywhere = {"rules": [{"resources": ["jobs"], "actions": ["get"]}], "namespaces": ["*"]}
    assert rbac.missing_grants(holder, "w", everywhere) == ["get jobs in every namespace"]
    wildcard = {"rules": [{"resources": ["*"], "actions": ["get"]}], "namespaces": ["default"]}
    assert "get *" in rbac.missing_grants(holder, "w", wildcard)
    cluster = {"rules": [{"resources": ["roles"], "actions": ["create"]}]}
    assert rbac.missing_grants(holder, "w", cluster) == []  # cluster-scoped: no namespaces
    admin = [role(["a"], ["*"], ["*"], ["*"])]
    assert rbac.missing_grants(admin, "a", more) == rbac.missing_grants(admin, "a", wildcard) == []
