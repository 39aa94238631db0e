"""Auth through the API with auth on: secure defaults, tokens, invites, users, throttling, audit,
and secrets that never show up in logs, responses or etcd."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from skyshift.api import create_app
from skyshift.api.auth import AuthService, bootstrap
from skyshift.api.auth.tokens import TokenIssuer
from skyshift.config import Settings
from skyshift.store import ObjectStore
from tests.fixtures.api import asgi_client, sample
from tests.fixtures.auth import (
    MakeSecureApi,
    admin_password,
    bearer,
    test_auth_config,
    token_for,
)
from tests.fixtures.etcd import EtcdServer

pytestmark = pytest.mark.integration

PASSWORD = "tr0ub4dor&3-long"
PUBLIC = {
    "/healthz",
    "/readyz",
    "/token",
    "/register_user",
    "/docs",
    "/redoc",
    "/openapi.json",
    "/docs/oauth2-redirect",
}


async def invite(client: httpx.AsyncClient, headers: dict[str, str], *roles: str) -> str:
    r = await client.post("/invite", json={"roles": list(roles)}, headers=headers)
    assert r.status_code == 201, r.text
    secret: str = r.json()["invite"]
    return secret


async def register(
    client: httpx.AsyncClient, name: str, secret: str, password: str = PASSWORD
) -> httpx.Response:
    body = {"username": name, "password": password, "invite": secret}
    return await client.post("/register_user", json=body)


async def new_user(
    client: httpx.AsyncClient, admin: dict[str, str], name: str, *roles: str
) -> dict[str, str]:
    r = await register(client, name, await invite(client, admin, *roles))
    assert r.status_code == 201, r.text
    return bearer(await token_for(client, name, PASSWORD))


def auth_of(client: httpx.AsyncClient) -> AuthService:
    app: Any = client._transport.app  # type: ignore[attr-defined]
    auth: AuthService = app.state.auth
    return auth


# --- secure by default -----------------------------------------------------------------------


async def test_default_app_requires_tokens_everywhere(store: ObjectStore, tmp_path: Path) -> None:
    """``create_app`` without an ``auth`` argument (what ``python -m skyshift.api`` does)."""
    app = create_app(Settings(home=tmp_path), store=store)
    assert app.state.auth is not None
    checked = 0
    routes = {p: [m.upper() for m in ops] for p, ops in app.openapi()["paths"].items()}
    for route in app.routes:  # the undocumented fallbacks (unknown kinds and paths)
        if isinstance(route, APIRoute):
            routes[route.path] = sorted(route.methods)
    async with asgi_client(app) as client:
        for template, methods in routes.items():
            if template in PUBLIC:
                continue
            path = template.replace("{namespace}", "default").replace("{d:path}", "x/y")
            for part in ("{name}", "{a}", "{b}", "{c}"):
                path = path.replace(part, "x")
            for method in methods:
                r = await client.request(method, path, json={})
                assert r.status_code == 401, f"{method} {path}: {r.status_code} {r.text}"
                assert r.headers["www-authenticate"] == "Bearer"
                checked += 1
        assert checked > 40
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"]["auth"] == "ok"
        bad = await client.post("/token", data={"username": "admin", "password": "admin"})
        assert bad.status_code == 401  # never admin/admin
    auth_dir = tmp_path / "auth"
    assert stat.S_IMODE(auth_dir.stat().st_mode) == 0o700
    for name in ("jwt.key", "admin-password"):
        assert stat.S_IMODE((auth_dir / name).stat().st_mode) == 0o600
    password = admin_password(tmp_path)
    assert len(password) >= 24 and password != "admin"
    stored = await store.get("users", "admin")
    assert stored["spec"]["passwordHash"].startswith("$argon2")


async def test_bootstrap_is_race_free_across_replicas(store: ObjectStore, tmp_path: Path) -> None:
    """Several replicas starting at once against one etcd (sharing one home): one admin, one
    password file that works, no pending files left."""
    config = test_auth_config(tmp_path)
    services = [AuthService(store, config) for _ in range(8)]
    await asyncio.gather(*(s.bootstrap() for s in services))
    users = (await store.list("users")).items
    assert [u["metadata"]["name"] for u in users] == ["admin"]
    assert sorted(r["metadata"]["name"] for r in (await store.list("roles")).items) == [
        "admin",
        "inviter",
        "reader",
    ]
    password = admin_password(tmp_path)
    issued = await services[2].login("admin", password, "127.0.0.1")
    assert services[0].tokens.verify(issued.token).username == "admin"  # one shared key
    assert not list((tmp_path / "auth").glob("*.pending-*"))
    await AuthService(store, config).bootstrap()  # a restart changes nothing
    assert admin_password(tmp_path) == password


async def test_edited_default_roles_survive_restarts(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    reader = (await secure_client.get("/roles/reader", headers=admin_headers)).json()
    reader["spec"]["namespaces"] = ["default"]
    assert (
        await secure_client.put("/roles/reader", json=reader, headers=admin_headers)
    ).status_code == 200
    await auth_of(secure_client).bootstrap()
    again = (await secure_client.get("/roles/reader", headers=admin_headers)).json()
    assert again["spec"]["namespaces"] == ["default"]


# --- tokens ----------------------------------------------------------------------------------


async def test_token_lifecycle(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str], auth_home: Path
) -> None:
    c = secure_client
    alice = await new_user(c, admin_headers, "alice", "reader")
    assert (await c.get("/default/jobs", headers=alice)).status_code == 200

    resp = await c.post("/token", data={"username": "alice", "password": PASSWORD})
    body = resp.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == 12 * 3600
    assert resp.headers["cache-control"] == "no-store"
    again = await token_for(c, "alice", PASSWORD)
    assert again != body["access_token"]  # re-login issues a new token; both are valid
    assert (await c.get("/default/jobs", headers=bearer(again))).status_code == 200

    auth = auth_of(c)
    uid = (await c.get("/users/alice", headers=alice)).json()["metadata"]["uid"]
    expired = auth.tokens.issue("alice", uid, ttl_seconds=-60).token
    r = await c.get("/default/jobs", headers=bearer(expired))
    assert r.status_code == 401 and "token expired" in r.json()["error"]["message"]

    forged = TokenIssuer(b"x" * 64, 3600).issue("admin", "whatever").token
    assert (await c.get("/default/jobs", headers=bearer(forged))).status_code == 401

    header, payload, sig = alice["Authorization"].split()[1].split(".")
    claims = base64.urlsafe_b64decode(payload + "==").replace(b'"alice"', b'"admin"')
    tampered = ".".join([header, base64.urlsafe_b64encode(claims).rstrip(b"=").decode(), sig])
    assert (await c.get("/users", headers=bearer(tampered))).status_code == 401

    ghost = auth.tokens.issue("ghost", "no-such-uid").token
    r = await c.get("/default/jobs", headers=bearer(ghost))
    assert r.status_code == 401 and "no longer exists" in r.json()["error"]["message"]

    assert (await c.delete("/users/alice", headers=admin_headers)).status_code == 200
    assert (await c.get("/default/jobs", headers=alice)).status_code == 401
    # a new account of the same name neither revives old tokens nor inherits roles
    reborn = await new_user(c, admin_headers, "alice")
    assert (await c.get("/default/jobs", headers=alice)).status_code == 401
    assert (await c.get("/default/jobs", headers=reborn)).status_code == 403
    assert (
        await c.get("/default/jobs", headers={"Authorization": "Basic YTpi"})
    ).status_code == 401


async def test_wrong_password_and_unknown_user_look_the_same(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    await new_user(secure_client, admin_headers, "bob")
    wrong = await secure_client.post("/token", data={"username": "bob", "password": "nope-nope"})
    unknown = await secure_client.post("/token", data={"username": "zed", "password": "nope-nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert wrong.json()["error"]["reason"] == "LoginFailed"
    r = await secure_client.post("/token", json={"username": "bob", "password": PASSWORD})
    assert r.status_code == 200  # JSON works as well as the OAuth2 form


# --- invites ---------------------------------------------------------------------------------


async def test_invites_are_single_use_and_revocable(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    secret = await invite(c, admin_headers, "reader")
    first = await register(c, "carol", secret)
    assert first.status_code == 201
    assert first.json()["status"]["roles"] == "reader"
    reuse = await register(c, "carol2", secret)
    assert reuse.status_code == 403 and "invalid invite" in reuse.text

    revoked = await invite(c, admin_headers)
    assert (
        await c.post("/revoke_invite", json={"invite": revoked}, headers=admin_headers)
    ).status_code == 200
    assert (await register(c, "dave", revoked)).status_code == 403
    assert (
        await c.post("/revoke_invite", json={"invite": revoked}, headers=admin_headers)
    ).status_code == 404
    assert (await register(c, "erin", "made-up")).status_code == 403


async def test_registration_checks_before_using_the_invite(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    secret = await invite(c, admin_headers)
    assert (await register(c, "admin", secret)).status_code == 409  # name taken
    for bad in ("bad/name", "_lead", "tab\there", "x" * 64):
        bad_reply = await register(c, bad, secret)
        assert bad_reply.status_code == 422, bad
        assert "letters, digits, '_' and '-'" in bad_reply.text
    assert (await register(c, "frank", secret, password="short")).status_code == 422
    assert (await register(c, "frank", secret)).status_code == 201  # the invite still worked


async def test_user_names_with_capitals_and_underscores_work_as_in_the_original(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    """``john_doe`` was allowed by the original SkyShift; it registers, logs in and is found."""
    c = secure_client
    headers = await new_user(c, admin_headers, "john_doe")
    assert (await c.get("/users/john_doe", headers=admin_headers)).status_code == 200
    await new_user(c, admin_headers, "JaneDoe")
    names = {u["metadata"]["name"] for u in
             (await c.get("/users", headers=admin_headers)).json()["items"]}
    assert {"john_doe", "JaneDoe"} <= names
    assert headers["Authorization"].startswith("Bearer ")


async def test_concurrent_registrations_with_one_invite(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    secret = await invite(secure_client, admin_headers, "reader")
    results = await asyncio.gather(
        *(register(secure_client, f"racer{i}", secret) for i in range(5))
    )
    assert sorted(r.status_code for r in results) == [201, 403, 403, 403, 403]
    users = (await secure_client.get("/users", headers=admin_headers)).json()["items"]
    assert sum(u["metadata"]["name"].startswith("racer") for u in users) == 1


async def test_inviter_cannot_grant_more_than_it_holds(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    ivy = await new_user(c, admin_headers, "ivy", "inviter")
    r = await c.post("/invite", json={"roles": ["admin"]}, headers=ivy)
    assert r.status_code == 403 and "may only grant roles it holds" in r.text
    r = await c.post("/invite", json={"roles": ["reader"]}, headers=ivy)
    assert r.status_code == 403  # ivy is not a reader either
    r = await c.post("/invite", json={"roles": ["no-such-role"]}, headers=ivy)
    assert r.status_code == 404
    ok = await invite(c, ivy, "inviter")  # a role it holds
    plain = await invite(c, ivy)  # or none

    # ivy loses the inviter role: her invites no longer grant it
    role = (await c.get("/roles/inviter", headers=admin_headers)).json()
    role["spec"]["users"] = []
    assert (await c.put("/roles/inviter", json=role, headers=admin_headers)).status_code == 200
    r = await register(c, "jack", ok)
    assert r.status_code == 403 and "may no longer grant inviter" in r.text
    assert (await register(c, "jill", plain)).status_code == 201
    assert (await c.post("/invite", json={"roles": []}, headers=ivy)).status_code == 403

    nobody = await new_user(c, admin_headers, "nobody")
    assert (await c.post("/invite", json={}, headers=nobody)).status_code == 403


async def test_role_writers_cannot_escalate(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    """Holding create/update on roles does not let anyone grant more than they hold."""
    c = secure_client
    writer = {
        "kind": "Role",
        "metadata": {"name": "role-writer"},
        "spec": {
            "rules": [
                {"resources": ["roles"], "actions": ["create", "update", "patch", "get"]},
                {"resources": ["jobs"], "actions": ["get", "list"]},
            ],
            "namespaces": ["default"],
        },
    }
    assert (await c.post("/roles", json=writer, headers=admin_headers)).status_code == 201
    rw = await new_user(c, admin_headers, "rw", "role-writer")

    def grant(name: str, resources: list[str], actions: list[str], ns: list[str]) -> Any:
        rules = [{"resources": resources, "actions": actions}]
        spec = {"rules": rules, "namespaces": ns, "users": ["rw"]}
        return {"kind": "Role", "metadata": {"name": name}, "spec": spec}

    ok = await c.post("/roles", json=grant("fine", ["jobs"], ["get"], ["default"]), headers=rw)
    assert ok.status_code == 201
    for name, res, act, ns in [
        ("del", ["jobs"], ["delete"], ["default"]),
        ("wide", ["jobs"], ["get"], ["*"]),
        ("other", ["jobs"], ["get"], ["prod"]),
        ("star", ["*"], ["*"], ["*"]),
        ("users", ["users"], ["list"], []),
    ]:
        r = await c.post("/roles", json=grant(name, res, act, ns), headers=rw)
        assert r.status_code == 403, (name, r.text)
        assert "granting more than it holds" in r.json()["error"]["message"]
    bigger = grant("fine", ["jobs"], ["get", "delete"], ["default"])
    assert (await c.put("/roles", json=bigger, headers=rw)).status_code == 403  # apply
    current = (await c.get("/roles/fine", headers=rw)).json()
    current["spec"]["rules"][0]["actions"].append("delete")
    assert (await c.put("/roles/fine", json=current, headers=rw)).status_code == 403
    patch = [{"op": "add", "path": "/spec/rules/0/actions/-", "value": "delete"}]
    r = await c.patch("/roles/fine", json=patch, headers=rw)
    assert r.status_code == 403
    admin_role = await c.patch(
        "/roles/admin",
        json={"spec": {"users": ["admin", "rw"]}},
        headers={**rw, "Content-Type": "application/merge-patch+json"},
    )
    assert admin_role.status_code == 403  # joining a role it cannot hold
    assert (await c.get("/default/jobs", headers=rw)).status_code == 200
    assert (await c.delete("/default/jobs/x", headers=rw)).status_code == 403


async def test_only_the_creator_or_an_admin_revokes(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    a = await new_user(c, admin_headers, "inv-a", "inviter")
    b = await new_user(c, admin_headers, "inv-b", "inviter")
    secret = await invite(c, a)
    assert (await c.post("/revoke_invite", json={"invite": secret}, headers=b)).status_code == 403
    assert (await c.post("/revoke_invite", json={"invite": secret}, headers=a)).status_code == 200


async def test_invites_expire(make_secure_api: MakeSecureApi, auth_home: Path) -> None:
    async with asgi_client(make_secure_api(invite_ttl_hours=1 / 3600)) as c:
        admin = bearer(await token_for(c, "admin", admin_password(auth_home)))
        secret = await invite(c, admin)
        await asyncio.sleep(1.2)
        assert (await register(c, "late", secret)).status_code == 403


# --- users -----------------------------------------------------------------------------------


async def test_users_see_only_themselves(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    kim = await new_user(c, admin_headers, "kim", "reader")
    await new_user(c, admin_headers, "lee")
    mine = (await c.get("/users", headers=kim)).json()
    assert [u["metadata"]["name"] for u in mine["items"]] == ["kim"]
    assert mine["items"][0]["status"]["roles"] == "reader"
    assert (await c.get("/users/kim", headers=kim)).status_code == 200
    assert (await c.get("/users/lee", headers=kim)).status_code == 403
    assert (await c.get("/users/nobody-at-all", headers=kim)).status_code == 403  # no probing
    every = (await c.get("/users", headers=admin_headers)).json()["items"]
    assert {u["metadata"]["name"] for u in every} >= {"admin", "kim", "lee"}
    assert (await c.delete("/users/lee", headers=kim)).status_code == 403
    assert (await c.delete("/users/admin", headers=admin_headers)).status_code == 409  # self
    assert (await c.delete("/users/nobody-at-all", headers=admin_headers)).status_code == 404
    # users are not reachable through the object routes
    assert (
        await c.put("/users/kim", json={"spec": {"passwordHash": "x"}}, headers=admin_headers)
    ).status_code in (404, 405)


async def test_deleting_a_user_removes_it_from_roles(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    await new_user(c, admin_headers, "max", "reader", "inviter")
    assert (await c.delete("/users/max", headers=admin_headers)).status_code == 200
    for role in ("reader", "inviter"):
        users = (await c.get(f"/roles/{role}", headers=admin_headers)).json()["spec"]["users"]
        assert "max" not in users


# --- throttling ------------------------------------------------------------------------------


async def test_brute_force_is_throttled_per_user(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    await new_user(c, admin_headers, "target")
    for i in range(5):
        r = await c.post("/token", data={"username": "target", "password": f"guess-{i}"})
        assert r.status_code == 401
    r = await c.post("/token", data={"username": "target", "password": "guess-6"})
    assert r.status_code == 429
    assert 1 <= int(r.headers["retry-after"]) <= 300
    assert r.json()["error"]["reason"] == "TooManyRequests"
    right = await c.post("/token", data={"username": "target", "password": PASSWORD})
    assert right.status_code == 429  # even the right password waits: no oracle while locked
    assert (await c.post("/token", data={"username": "admin", "password": "x" * 9})
            ).status_code == 401  # fmt: skip  # other users are unaffected


async def test_brute_force_is_throttled_per_address(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    async with asgi_client(make_secure_api(max_failures_per_address=4)) as c:
        for name in ("u1", "u2", "u3", "u4"):
            r = await c.post("/token", data={"username": name, "password": "wrong-pw"})
            assert r.status_code == 401
        r = await c.post(
            "/token", data={"username": "admin", "password": admin_password(auth_home)}
        )
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0


# --- audit -----------------------------------------------------------------------------------


async def test_audit_records_every_mutation(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    c = secure_client
    secret = await invite(c, admin_headers, "reader")
    assert (await register(c, "auditee", secret)).status_code == 201
    user = bearer(await token_for(c, "auditee", PASSWORD))
    assert (
        await c.post("/token", data={"username": "auditee", "password": "bad-pass"})
    ).status_code == 401
    assert (
        await c.post("/default/jobs", json=sample("jobs", "a1"), headers=admin_headers)
    ).status_code == 201
    assert (await c.delete("/default/jobs/a1", headers=user)).status_code == 403
    assert (await c.get("/audit", headers=user)).status_code == 403
    assert (await c.post("/default/jobs", json=sample("jobs", "a2"))).status_code == 401

    items = (await c.get("/audit", headers=admin_headers)).json()["items"]
    seen = [
        (
            r["user"],
            r["action"],
            r.get("resource"),
            r.get("namespace"),
            r.get("name"),
            r["code"],
            r["result"],
        )
        for r in items
    ]
    assert seen[0] == ("auditee", "delete", "jobs", "default", "a1", 403, "denied")  # newest
    assert ("admin", "create", "jobs", "default", "a1", 201, "success") in seen
    # a failed login proves no name: its actor is anonymous, the name tried only a detail
    assert ("system:anonymous", "login", "tokens", None, None, 401, "denied") in seen
    assert not any(r["user"] == "auditee" and r["code"] == 401 for r in items)
    failed = next(r for r in items if r["action"] == "login" and r["code"] == 401)
    assert failed["details"] == {"claimedUser": "auditee"}
    assert ("auditee", "login", "tokens", None, None, 200, "success") in seen
    assert ("auditee", "register", "users", None, "auditee", 201, "success") in seen
    assert ("admin", "invite", "invites", None, None, 201, "success") in seen
    assert not any(r["path"] == "/default/jobs" and r["code"] == 401 for r in items)
    for record in items:
        assert record["time"].endswith("Z") and record["client"]
    register_rec = next(r for r in items if r["action"] == "register")
    assert register_rec["details"] == {"roles": ["reader"], "invitedBy": "admin"}
    mine = (await c.get("/audit", params={"user": "auditee"}, headers=admin_headers)).json()
    assert {r["user"] for r in mine["items"]} == {"auditee"}
    page = (await c.get("/audit", params={"limit": 2}, headers=admin_headers)).json()
    assert len(page["items"]) == 2 and page["metadata"]["continue"]


async def test_denied_records_are_bounded_per_user_and_503s_name_the_user(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    """Issue 26: a user with no rights wrote 3,000 audit records in 4.7 s, and requests refused
    during an etcd outage were recorded with an empty user."""
    from skyshift.api.auth.audit import DENIED_PER_MINUTE
    from skyshift.store.errors import Unavailable

    app = make_secure_api()
    async with asgi_client(app) as c:
        admin = bearer(await token_for(c, "admin", admin_password(auth_home)))
        secret = await invite(c, admin, "reader")
        assert (await register(c, "nosy", secret)).status_code == 201
        user = bearer(await token_for(c, "nosy", PASSWORD))
        for i in range(DENIED_PER_MINUTE + 20):
            r = await c.delete(f"/default/jobs/x{i}", headers=user)
            assert r.status_code == 403
        mine = (await c.get("/audit", params={"user": "nosy", "limit": 500},
                            headers=admin)).json()["items"]
        denied = [r for r in mine if r["result"] == "denied"]
        assert len(denied) == DENIED_PER_MINUTE  # the rest only logged
        # another user's denied requests have their own budget
        assert (await c.post("/default/jobs", json=sample("jobs", "ok"), headers=admin)
                ).status_code == 201

        async def down(name: str) -> None:
            raise Unavailable("etcd is down")

        auth = app.state.auth
        auth.directory.invalidate()
        real, auth.directory.user = auth.directory.user, down
        try:
            r = await c.post("/default/jobs", json=sample("jobs", "during"), headers=admin)
        finally:
            auth.directory.user = real
        assert r.status_code == 503, r.text
        items = (await c.get("/audit", headers=admin)).json()["items"]
        outage = next(x for x in items if x["code"] == 503)
        assert outage["user"] == "admin" and outage["path"] == "/default/jobs"
        assert "token" in outage["details"]["identity"]


async def test_a_schedule_is_owned_by_who_wrote_it(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    """Its runs are checked against its owner's rights (issue 26): the API sets the owner, a
    manifest cannot name someone else, and a patch cannot change it."""
    from skyshift.models.schedule import OWNER_USER_ANNOTATION

    c = secure_client
    merge = {**admin_headers, "Content-Type": "application/merge-patch+json"}
    manifest = {"kind": "Schedule", "metadata": {"name": "nightly", "annotations": {
        OWNER_USER_ANNOTATION: "someone-else"}},
        "spec": {"interval": "1h", "jobTemplate": {"spec": {"run": "true"}}}}
    r = await c.post("/default/schedules", json=manifest, headers=admin_headers)
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["annotations"][OWNER_USER_ANNOTATION] == "admin"
    forged = json.dumps({"metadata": {"annotations": {OWNER_USER_ANNOTATION: "someone-else"}}})
    r = await c.patch("/default/schedules/nightly", headers=merge, content=forged)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == f"metadata.annotations.{OWNER_USER_ANNOTATION}"
    r = await c.patch("/default/schedules/nightly", headers=merge,
                      content='{"spec":{"interval":"2h"}}')
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["annotations"][OWNER_USER_ANNOTATION] == "admin"


# --- secrets never leak ----------------------------------------------------------------------


async def _etcd_values(etcd: EtcdServer, prefix: str) -> bytes:
    key = base64.b64encode(prefix.encode()).decode()
    end = base64.b64encode(prefix[:-1].encode() + bytes([ord(prefix[-1]) + 1])).decode()
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"http://{etcd.endpoint}/v3/kv/range", json={"key": key, "range_end": end}
        )
    kvs = r.json().get("kvs", [])
    assert kvs, "nothing found under the store prefix"
    return b"\n".join(
        base64.b64decode(kv["key"]) + b"=" + base64.b64decode(kv["value"]) for kv in kvs
    )


async def test_passwords_never_in_logs_responses_or_etcd(
    make_secure_api: MakeSecureApi,
    auth_home: Path,
    store: ObjectStore,
    etcd_server: EtcdServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret_pw, wrong_pw = "Zebra-Quartz-9911", "Wrong-Guess-5522"
    bodies: list[str] = []
    async with asgi_client(make_secure_api()) as c:

        async def call(method: str, url: str, **kw: Any) -> httpx.Response:
            r = await c.request(method, url, **kw)
            bodies.append(r.text + str(r.headers))
            return r

        admin_pw = admin_password(auth_home)
        admin = bearer(
            (await call("POST", "/token", data={"username": "admin", "password": admin_pw})).json()[
                "access_token"
            ]
        )
        inv = (await call("POST", "/invite", json={"roles": ["reader"]}, headers=admin)).json()
        await call(
            "POST",
            "/register_user",
            json={"username": "pat", "password": secret_pw, "invite": inv["invite"]},
        )
        await call(
            "POST",
            "/register_user",
            json={"username": "pat2", "password": secret_pw, "invite": inv["invite"]},
        )
        await call(
            "POST", "/register_user", json={"username": "pat3", "password": secret_pw, "invite": 7}
        )
        await call("POST", "/token", data={"username": "pat", "password": wrong_pw})
        token = (
            await call("POST", "/token", data={"username": "pat", "password": secret_pw})
        ).json()["access_token"]
        await call("GET", "/users", headers=admin)
        await call("GET", "/users/pat", headers=bearer(token))
        await call("DELETE", "/users/pat", headers=admin)
        await call("GET", "/audit", headers=admin)
        await call("GET", "/openapi.json")
    everything = "\n".join(bodies)
    raw = await _etcd_values(etcd_server, store.prefix + "/")
    for secret in (secret_pw, wrong_pw, admin_pw, inv["invite"]):
        assert secret not in caplog.text
        assert secret.encode() not in raw
    for secret in (secret_pw, wrong_pw):
        assert secret not in everything
    assert "passwordHash" not in everything
    assert b"$argon2id$" in raw  # what is stored instead


async def test_token_time_is_configurable(make_secure_api: MakeSecureApi, auth_home: Path) -> None:
    async with asgi_client(make_secure_api(token_ttl_hours=2.0)) as c:
        r = await c.post(
            "/token", data={"username": "admin", "password": admin_password(auth_home)}
        )
        assert r.json()["expires_in"] == 7200
        assert r.json()["expires_at"] - time.time() == pytest.approx(7200, abs=5)


async def test_a_reader_role_stored_before_pipelines_gains_them_unless_edited(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    """An install made before pipelines and schedules existed stored a ``reader`` role without
    them; the next start grants them (a reader could otherwise not see a pipeline), but a role
    an admin edited is left as the admin made it."""
    c = secure_client
    old_kinds = [k for k in bootstrap.READABLE if k not in ("pipelines", "schedules")]
    reader = (await c.get("/roles/reader", headers=admin_headers)).json()
    reader["spec"]["rules"] = [{"resources": old_kinds, "actions": ["get", "list", "watch"]}]
    assert (await c.put("/roles/reader", json=reader, headers=admin_headers)).status_code == 200
    alice = await new_user(c, admin_headers, "alice", "reader")
    assert (await c.get("/default/pipelines", headers=alice)).status_code == 403

    await auth_of(c).bootstrap()  # the next start of an API server
    again = (await c.get("/roles/reader", headers=admin_headers)).json()
    assert set(again["spec"]["rules"][0]["resources"]) == set(bootstrap.READABLE)
    assert again["metadata"]["generation"] == reader["metadata"]["generation"] + 2
    assert (await c.get("/default/pipelines", headers=alice)).status_code == 200
    assert (await c.get("/default/schedules", headers=alice)).status_code == 200

    edited = [{"resources": ["jobs"], "actions": ["get", "list"]}]
    again["spec"]["rules"] = edited
    assert (await c.put("/roles/reader", json=again, headers=admin_headers)).status_code == 200
    await auth_of(c).bootstrap()
    kept = (await c.get("/roles/reader", headers=admin_headers)).json()
    assert kept["spec"]["rules"] == edited
