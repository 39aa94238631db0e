"""Hostile callers of the auth routes: forged audit actors, audit floods, lockouts of other
people, spoofed client addresses, junk e-mail addresses."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from skyshift.api import ApiOptions
from skyshift.api.auth import AuthService
from skyshift.api.auth.audit import ANONYMOUS
from skyshift.api.clientaddr import parse_proxies
from skyshift.store import ObjectStore
from tests.fixtures.api import asgi_client
from tests.fixtures.auth import MakeSecureApi, admin_password, bearer, token_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PASSWORD = "tr0ub4dor&3-long"


@contextlib.asynccontextmanager
async def from_address(app: FastAPI, ip: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` (whose lifespan already runs) connecting from ``ip``."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(ip, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


async def audit_items(auth: AuthService) -> list[dict[str, Any]]:
    items, _ = await auth.audit.list(10_000, None, None)
    return items


async def invite(c: httpx.AsyncClient, admin: dict[str, str], *roles: str) -> str:
    r = await c.post("/invite", json={"roles": list(roles)}, headers=admin)
    assert r.status_code == 201, r.text
    secret: str = r.json()["invite"]
    return secret


# --- 4. no forged actors in the audit trail, and no flood of it -------------------------------


async def test_failed_logins_are_audited_as_anonymous(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    app = make_secure_api()
    async with asgi_client(app) as c:
        auth: AuthService = app.state.auth
        for name in ("admin", "ceo", "nobody-at-all"):
            r = await c.post("/token", data={"username": name, "password": "wrong-guess"})
            assert r.status_code == 401
        await token_for(c, "admin", admin_password(auth_home))
        items = await audit_items(auth)
    logins = [r for r in items if r["action"] == "login"]
    assert {r["user"] for r in logins if r["code"] == 401} == {ANONYMOUS}
    assert {r["details"]["claimedUser"] for r in logins if r["code"] == 401} == {
        "admin",
        "ceo",
        "nobody-at-all",
    }
    assert all(r["client"] == "127.0.0.1" for r in logins)
    ok = [r for r in logins if r["code"] == 200]
    assert len(ok) == 1 and ok[0]["user"] == "admin" and "details" not in ok[0]
    assert not any(r["user"] in ("ceo", "nobody-at-all") for r in items)


async def test_failed_registrations_are_throttled_and_not_audited_by_name(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    app = make_secure_api(max_failures_per_address=5)
    async with asgi_client(app) as c:
        auth: AuthService = app.state.auth
        codes = []
        for i in range(30):
            body = {"username": f"forged-{i}", "password": PASSWORD, "invite": f"guess-{i}"}
            codes.append((await c.post("/register_user", json=body)).status_code)
        assert codes[:5] == [403] * 5 and set(codes[5:]) == {429}
        items = await audit_items(auth)
        registrations = [r for r in items if r["action"] == "register"]
        assert len(registrations) == 5  # throttled ones are only logged
        assert {r["user"] for r in registrations} == {ANONYMOUS}
        assert not any(r["user"].startswith("forged-") for r in items)
        # another address is not throttled, and a good registration records its own name
        admin = bearer(await token_for(c, "admin", admin_password(auth_home)))
        secret = await invite(c, admin)
        async with from_address(app, "10.1.2.3") as other:
            r = await other.post(
                "/register_user", json={"username": "real", "password": PASSWORD, "invite": secret}
            )
        assert r.status_code == 201, r.text
        items = await audit_items(auth)
        mine = [r for r in items if r["action"] == "register" and r["code"] == 201]
        assert [(r["user"], r["client"]) for r in mine] == [("real", "10.1.2.3")]


async def test_anonymous_audit_records_are_bounded_across_addresses(
    make_secure_api: MakeSecureApi,
) -> None:
    app = make_secure_api()
    async with asgi_client(app):
        auth: AuthService = app.state.auth
        for i in range(90):  # one failure from each of 90 addresses: no per-address throttle
            async with from_address(app, f"10.9.{i // 200}.{i % 200}") as c:
                body = {"username": f"flood-{i}", "password": PASSWORD, "invite": "nope"}
                assert (await c.post("/register_user", json=body)).status_code == 403
        items = await audit_items(auth)
    assert 0 < len([r for r in items if r["user"] == ANONYMOUS]) <= 60


# --- 7. a lockout is per user and address -----------------------------------------------------


async def test_failures_from_one_address_do_not_lock_the_user_out_elsewhere(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    app = make_secure_api(max_failures_per_user_total=12)
    async with asgi_client(app):
        password = admin_password(auth_home)
        async with from_address(app, "203.0.113.66") as attacker:
            for i in range(5):
                r = await attacker.post("/token", data={"username": "admin", "password": f"g{i}"})
                assert r.status_code == 401
            r = await attacker.post("/token", data={"username": "admin", "password": password})
            assert r.status_code == 429  # locked out from there, even with the password
        async with from_address(app, "192.0.2.10") as admin:
            assert await token_for(admin, "admin", password)  # but not from here
        # many addresses together reach the (much higher) limit for the user as a whole
        for n in range(3):
            async with from_address(app, f"203.0.113.{n}") as attacker:
                for i in range(4):
                    r = await attacker.post(
                        "/token", data={"username": "admin", "password": f"g{i}"}
                    )
                    assert r.status_code in (401, 429)
        async with from_address(app, "192.0.2.11") as admin:
            r = await admin.post("/token", data={"username": "admin", "password": password})
            assert r.status_code == 429


# --- 6. X-Forwarded-For only from trusted proxies ---------------------------------------------


async def test_forwarded_for_counts_only_from_trusted_proxies(
    make_secure_api: MakeSecureApi, auth_home: Path
) -> None:
    async def fail(c: httpx.AsyncClient, forwarded: str) -> int:
        r = await c.post(
            "/token",
            data={"username": "admin", "password": "wrong-guess"},
            headers={"X-Forwarded-For": forwarded},
        )
        return r.status_code

    first = make_secure_api(max_failures_per_address=3)  # no trusted proxies
    async with asgi_client(first) as c:
        assert [await fail(c, f"198.51.100.{i}") for i in range(4)] == [401, 401, 401, 429]
        before = {r["metadata"]["name"] for r in await audit_items(first.state.auth)}
        assert before
    trusted = ApiOptions(trusted_proxies=parse_proxies("127.0.0.0/8, ::1"))
    app = make_secure_api(options=trusted, max_failures_per_address=3)
    async with asgi_client(app) as c:
        password = admin_password(auth_home)
        assert [await fail(c, f"198.51.100.{i}") for i in range(4)] == [401] * 4
        # the right-most address no trusted proxy wrote is the client: forged entries on its
        # left change nothing
        spoofed = [await fail(c, f"10.0.0.{i}, 198.51.100.50") for i in range(4)]
        assert spoofed == [401, 401, 401, 429]
        r = await c.post(
            "/token",
            data={"username": "admin", "password": password},
            headers={"X-Forwarded-For": "198.51.100.60, 127.0.0.1"},
        )
        assert r.status_code == 200
        items = await audit_items(app.state.auth)
    clients = {r["client"] for r in items if r["metadata"]["name"] not in before}
    assert clients == {f"198.51.100.{i}" for i in (0, 1, 2, 3, 50, 60)}


def test_the_server_process_ignores_forwarded_for_from_loopback(start_api: Any) -> None:
    """uvicorn believes X-Forwarded-For from 127.0.0.1 by default; the server must not."""

    def attempts(url: str, n: int) -> list[int]:
        codes = []
        for i in range(n):
            r = httpx.post(
                f"{url}/token",
                data={"username": f"u{i}", "password": "wrong-guess"},
                headers={"X-Forwarded-For": f"198.51.100.{i}"},
                timeout=30,
            )
            codes.append(r.status_code)
        return codes

    limits = {"SKYSHIFT_LOGIN_MAX_FAILURES_PER_ADDRESS": "3"}
    assert attempts(start_api(**limits).url, 4) == [401, 401, 401, 429]
    behind_proxy = start_api(**limits, SKYSHIFT_TRUSTED_PROXIES="127.0.0.1").url
    assert attempts(behind_proxy, 4) == [401] * 4


# --- 8. the e-mail address at registration ----------------------------------------------------


async def test_registration_refuses_a_junk_email_without_using_the_invite(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str], store: ObjectStore
) -> None:
    c = secure_client
    secret = await invite(c, admin_headers, "reader")
    for bad in ("not-an-email", "a@b", "two@@example.com", "x@exa mple.com", "@example.com"):
        body = {"username": "mailer", "password": PASSWORD, "invite": secret, "email": bad}
        r = await c.post("/register_user", json=body)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["field"] == "email"
        with pytest.raises(Exception):  # noqa: B017  # nothing was created
            await store.get("users", "mailer")
    good = {"username": "mailer", "password": PASSWORD, "invite": secret, "email": "m@example.com"}
    r = await c.post("/register_user", json=good)
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["email"] == "m@example.com"


# --- 5. nobody writes over or deletes a role granting more than they hold ----------------------


async def test_role_writers_cannot_overwrite_or_delete_roles_they_do_not_hold(
    secure_client: httpx.AsyncClient, admin_headers: dict[str, str], store: ObjectStore
) -> None:
    c = secure_client
    writer = {
        "kind": "Role",
        "metadata": {"name": "role-admin"},
        "spec": {
            "rules": [
                {"resources": ["roles"], "actions": ["create", "update", "patch", "delete", "get"]},
                {"resources": ["jobs"], "actions": ["get"]},
            ],
            "namespaces": ["default"],
        },
    }
    assert (await c.post("/roles", json=writer, headers=admin_headers)).status_code == 201
    secret = await invite(c, admin_headers, "role-admin")
    body = {"username": "ra", "password": PASSWORD, "invite": secret}
    assert (await c.post("/register_user", json=body)).status_code == 201
    ra = bearer(await token_for(c, "ra", PASSWORD))
    empty = {"kind": "Role", "metadata": {"name": "admin"}, "spec": {"rules": [], "users": []}}
    before = {p: (await store.list(p)).items for p in ("roles", "users")}
    for name in ("admin", "reader"):
        attempts = [
            c.put(f"/roles/{name}", json={**empty, "metadata": {"name": name}}, headers=ra),
            c.put("/roles", json={**empty, "metadata": {"name": name}}, headers=ra),
            c.patch(f"/roles/{name}", json={"spec": {"rules": []}},
                    headers={**ra, "Content-Type": "application/merge-patch+json"}),
            c.patch(f"/roles/{name}", json=[{"op": "remove", "path": "/spec/rules/0"}],
                    headers={**ra, "Content-Type": "application/json-patch+json"}),
            c.delete(f"/roles/{name}", headers=ra),
        ]
        for attempt in attempts:
            r = await attempt
            assert r.status_code == 403, (name, r.request.method, r.text)
            err = r.json()["error"]
            assert err["field"] == "spec.rules" and f"role {name}" in err["message"]
    assert {p: (await store.list(p)).items for p in ("roles", "users")} == before
    # a role it holds all of, it may still change and delete
    mine = {"kind": "Role", "metadata": {"name": "mine"},
            "spec": {"rules": [{"resources": ["jobs"], "actions": ["get"]}],
                     "namespaces": ["default"]}}
    assert (await c.post("/roles", json=mine, headers=ra)).status_code == 201
    mine["spec"]["users"] = ["ra"]
    assert (await c.put("/roles/mine", json=mine, headers=ra)).status_code == 200
    assert (await c.put("/roles", json=mine, headers=ra)).status_code == 200
    r = await c.patch("/roles/mine", json={"spec": {"users": []}},
                      headers={**ra, "Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert (await c.delete("/roles/mine", headers=ra)).status_code == 200
    # and an admin may do anything
    r = await c.patch("/roles/reader", json={"spec": {"users": ["ra"]}},
                      headers={**admin_headers, "Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


# --- lone UTF-16 surrogates on the unauthenticated routes ---------------------------------------


async def test_a_lone_surrogate_in_credentials_is_refused_and_counted(
    make_secure_api: MakeSecureApi, auth_home: Path, store: ObjectStore
) -> None:
    """They were 500s (argon2, the name codec and the invite hash encode to UTF-8), which
    skipped the throttles."""
    as_json = {"Content-Type": "application/json"}
    app = make_secure_api(max_failures_per_address=3)
    async with asgi_client(app) as c:
        password = admin_password(auth_home)
        for body, field in [
            ('{"username":"admin","password":"\\ud800xxxxxxxx"}', "password"),
            ('{"username":"ad\\ud800","password":"xxxxxxxxxx"}', "username"),
            ('{"username":"admin","password":"xxxxxxxx\\udfff"}', "password"),
        ]:
            r = await c.post("/token", content=body, headers=as_json)
            assert r.status_code == 422, r.text
            assert r.json()["error"]["field"] == field and field in r.json()["error"]["message"]
        # each counted against the address: now even the right password is throttled there
        r = await c.post("/token", data={"username": "admin", "password": password})
        assert r.status_code == 429, r.text
        async with from_address(app, "192.0.2.20") as other:
            admin = bearer(await token_for(other, "admin", password))
            users_before = (await store.list("users")).items
            r = await other.post("/revoke_invite", content='{"invite":"\\ud800"}',
                                 headers={**as_json, **admin})
            assert r.status_code == 422 and r.json()["error"]["field"] == "invite", r.text
        reg = make_secure_api(max_failures_per_address=2)
        async with asgi_client(reg) as c2:
            body = '{"username":"bob","password":"xxxxxxxxxx","invite":"%s"}'
            for _ in range(2):
                r = await c2.post("/register_user", content=body % "\\ud800", headers=as_json)
                assert r.status_code == 422 and r.json()["error"]["field"] == "invite", r.text
            r = await c2.post("/register_user", content=body % "inv-x", headers=as_json)
            assert r.status_code == 429, r.text  # the refused attempts were counted
        assert (await store.list("users")).items == users_before
